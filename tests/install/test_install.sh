#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it as a user would: the layout is
# complete, a program builds against it with `pkg-config --cflags --libs kronos` and runs, the
# library exports the public kr_ API and nothing else, and the installed binary finds its demo
# model and candles relative to its prefix — also after the prefix is moved.
#   test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

for f in bin/kronos include/kronos.h include/kronos/status.h lib/libkronos.so lib/libkronos.so.0 \
         lib/pkgconfig/kronos.pc share/kronos/models/kronos-demo/predictor/config.json \
         share/kronos/models/kronos-demo/tokenizer/model.safetensors \
         share/kronos/data/XSHG_5min_600977.csv lib/systemd/system/kronos-serve.service \
         share/kronos/deploy/kronos-serve.json; do
  [ -e "$prefix/$f" ] || { echo "missing from the install: $f"; exit 1; }
done
soname=$(readelf -d "$prefix/lib/libkronos.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libkronos.so.0" ] || { echo "SONAME is '$soname'"; exit 1; }

# Only kr_ symbols, each declared in a public header.
exports=$(nm -D --defined-only "$prefix/lib/libkronos.so" | awk '{print $3}')
bad=$(echo "$exports" | grep -v '^kr_' || true)
[ -z "$bad" ] || { echo "exported beyond the API:"; echo "$bad"; exit 1; }
for sym in $exports; do
  grep -rqw "$sym" "$prefix/include" || { echo "exported but not in a public header: $sym"; exit 1; }
done
echo "libkronos.so: $(echo "$exports" | wc -l) exported functions, all public"

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# A sanitizer build's library needs the ASan runtime first in the process ("ASan runtime does
# not come first"): build the consumer with the same sanitizers then.
san=""
if readelf -d "$prefix/lib/libkronos.so" | grep -q 'libasan'; then
  san="-fsanitize=address,undefined"
fi
cc -std=c11 -Wall -Wextra -Werror $san "$src/tests/install/consumer.c" \
   $(pkg-config --cflags --libs kronos) -lm -lpthread -Wl,-rpath,"$prefix/lib" -o "$tmp/consumer"
"$tmp/consumer" "$prefix/share/kronos/models/kronos-demo"

# The binary is a client of the library like any other program: it loads the installed
# libkronos.so.0 (public API only; its build sees no internal header).
deps=$(ldd "$prefix/bin/kronos")
echo "$deps" | grep -q "libkronos.so.0 => $prefix/\(bin/../\)\?lib/" ||
  { echo "the installed kronos does not load $prefix/lib/libkronos.so.0:"; echo "$deps"; exit 1; }

# The installed binary, run from elsewhere with no hint, uses the installed demo model.
cd "$tmp"
env -u KRONOS_HOME "$prefix/bin/kronos" forecast --input "$prefix/share/kronos/data/XSHG_5min_600977.csv" \
    --pred-len 2 --seed 1 >"$tmp/a.csv"
mv "$prefix" "$tmp/moved"
env -u KRONOS_HOME "$tmp/moved/bin/kronos" forecast --input "$tmp/moved/share/kronos/data/XSHG_5min_600977.csv" \
    --pred-len 2 --seed 1 >"$tmp/b.csv"
cmp -s "$tmp/a.csv" "$tmp/b.csv" || { echo "moved install forecasts differently"; exit 1; }
[ "$(wc -l <"$tmp/a.csv")" -eq 3 ] || { echo "unexpected forecast output"; cat "$tmp/a.csv"; exit 1; }
echo "installed binary: default model found relative to its prefix (also after moving it)"
