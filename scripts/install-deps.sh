#!/usr/bin/env bash
# Installs the Debian packages kronos builds, tests and fuzzes with (skips apt when all are
# present, so it is quick and offline on a prepared machine). Needs root or sudo.
# libsqlite3-dev: the candle store behind `kronos ingest` / `kronos analyze`; libpq-dev: its
# PostgreSQL backend (`--db postgresql://...`, shared by replicas).
# libyaml-dev: the YAML config files of `kronos finetune` (the official finetune_csv format).
# libmicrohttpd-dev: the HTTP server behind `kronos serve` (and the stand-in LLM server of the
# narrative test); libcurl4-openssl-dev: its tests, the bench/load client and the optional
# `kronos analyze --llm-url` narrative. systemd: systemd-analyze, which checks the shipped unit
# (tests/deploy/check_unit.sh; it installs in a container, where it is not PID 1), and expands
# the unit's system-call filter, which libseccomp-dev's library applies to `kronos serve` in
# tests/deploy/check_syscall_filter.sh.
# --web: also what the web page's tests need (scripts/test.sh): Debian's Chromium, which
# tests/web/e2e.mjs drives headless through playwright-core, and Node.js/npm when the machine
# has none (the page's packages come from `npm ci` in web/, never from here).
# --python: also what the Python package in python/ needs (Debian's python3 3.11 with numpy,
# pandas, setuptools and pip to install it offline, tqdm for verbose=True's progress bar, pytest
# and distributed for its tests).
# --scale: also the servers of the scale-out tests (tests/scale/): PostgreSQL (a throwaway
# cluster, initdb into a temporary directory) and HAProxy in front of `kronos serve` replicas;
# and Prometheus for its promtool (~100 MB), which checks the shipped alerting rules and a live
# /metrics scrape (ctest deploy_configs, metrics_promtool); its server is never started.
set -euo pipefail
packages=(build-essential cmake pkg-config clang clang-format libclang-rt-14-dev
          libcjson-dev libcmocka-dev libopenblas-dev libxxhash-dev libsqlite3-dev libpq-dev
          libmicrohttpd-dev libcurl4-openssl-dev systemd libseccomp-dev libyaml-dev)
for opt in "$@"; do
  case "$opt" in
    --web)
      packages+=(chromium)
      command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
      ;;
    --python)
      packages+=(python3 python3-numpy python3-pandas python3-setuptools python3-pip
                 python3-tqdm python3-pytest python3-distributed)
      ;;
    --scale)
      packages+=(postgresql haproxy prometheus)
      ;;
    *) echo "install-deps.sh: unknown option '$opt' (--web, --python, --scale)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# Another apt (unattended-upgrades on a fresh machine, a second install run) holds dpkg's lock
# for a while: wait for it, up to 10 minutes, rather than fail the whole set-up at once.
lock_wait=(-o DPkg::Lock::Timeout=600)
$SUDO apt-get "${lock_wait[@]}" update -qq
$SUDO apt-get "${lock_wait[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
