#!/usr/bin/env bash
# Validates the shipped configs of deploy/ with the tools that read them: HAProxy's own parser
# (`haproxy -c`, Debian package haproxy: scripts/install-deps.sh --scale) on haproxy.cfg as
# shipped, and Prometheus' (`promtool check rules`, Debian package prometheus:
# scripts/install-deps.sh --scale) on prometheus-alerts.yml. What is not installed is skipped; with
# neither the test skips (77). That every metric the rules name exists is tests/docs (docs_check).
set -euo pipefail
deploy=$1
ran=0
if command -v haproxy >/dev/null; then
  haproxy -c -q -f "$deploy/haproxy.cfg" || { echo "deploy/haproxy.cfg: haproxy -c failed"; exit 1; }
  echo "haproxy.cfg: valid (haproxy -c)"
  ran=1
else
  echo "haproxy not installed: haproxy.cfg not checked (bash scripts/install-deps.sh --scale)"
fi
if command -v promtool >/dev/null; then
  promtool check rules "$deploy/prometheus-alerts.yml" ||
    { echo "deploy/prometheus-alerts.yml: promtool check rules failed"; exit 1; }
  ran=1
else
  echo "promtool not installed: prometheus-alerts.yml not checked (apt-get install prometheus)"
fi
[ "$ran" = 1 ] || { echo "SKIPPED: neither haproxy nor promtool installed"; exit 77; }
