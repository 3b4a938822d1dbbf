#!/usr/bin/env bash
# The web page at / after the README's set-up (issue 42, finding 3): `kronos serve` started as
# the README says, with no --web-root, from the build tree (whose share/kronos/web is web/dist,
# as an install's share/kronos/web is) serves the built page's HTML at /; a server whose page
# is not built answers / with an HTML page saying how to build it, not a JSON 404.
#   check_page_served.sh KRONOS_BINARY SOURCE_DIR
# Exit 77 (skipped) after the second check when web/dist is not built.
set -euo pipefail
kronos=$1
src=$2
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# Starts `kronos serve --port 0` with the environment given, waits for its address.
serve() {
  : >"$tmp/log"
  env -u KRONOS_DB "$@" "$kronos" serve --port 0 --db "$tmp/k.db" 2>"$tmp/log" &
  pid=$!
  for _ in $(seq 1 300); do
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$tmp/log" | head -1)
    [ -n "$url" ] && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/log"; echo "kronos serve exited"; exit 1; }
    sleep 0.1
  done
  cat "$tmp/log"; echo "kronos serve did not start"; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }

# A page that is not built: a KRONOS_HOME with the demo model and no web/.
mkdir -p "$tmp/home/models"
ln -s "$src/models/kronos-demo" "$tmp/home/models/kronos-demo"
serve KRONOS_HOME="$tmp/home"
got=$(curl -s -o "$tmp/body" -w '%{http_code} %{content_type}' "${url%/}/")
stop
case "$got" in
  "404 text/html"*) ;;
  *) echo "GET / without a built page: $got (want 404 text/html)"; cat "$tmp/body"; exit 1 ;;
esac
grep -q 'npm ci &amp;&amp; npm run build' "$tmp/body" ||
  { echo "the not-built page does not say how to build it:"; cat "$tmp/body"; exit 1; }
grep -q '^{' "$tmp/body" && { echo "GET / answered JSON"; exit 1; }
echo "not built: GET / is an HTML page with the build command"

if [ ! -f "$src/web/dist/index.html" ]; then
  echo "SKIPPED: web/dist is not built (cd web && npm ci && npm run build)"
  exit 77
fi
# The build tree's own layout, as after scripts/demo.sh: no --web-root, no KRONOS_HOME.
serve KRONOS_HOME=
got=$(curl -s -o "$tmp/body" -w '%{http_code} %{content_type}' "${url%/}/")
stop
case "$got" in
  "200 text/html"*) ;;
  *) echo "GET / after the set-up: $got (want 200 text/html)"; head -c 400 "$tmp/body"; exit 1 ;;
esac
cmp -s "$tmp/body" "$src/web/dist/index.html" ||
  { echo "GET / is not web/dist/index.html"; exit 1; }
echo "built: GET / is web/dist/index.html"
