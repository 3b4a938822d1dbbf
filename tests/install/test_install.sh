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
         lib/libkronos-tools.so.0 lib/pkgconfig/kronos.pc lib/pkgconfig/kronos-tools.pc share/kronos/models/kronos-demo/predictor/config.json \
         share/kronos/models/kronos-demo/tokenizer/model.safetensors \
         share/kronos/data/XSHG_5min_600977.csv lib/systemd/system/kronos-serve.service \
         share/kronos/deploy/kronos-serve.json; do
  [ -e "$prefix/$f" ] || { echo "missing from the install: $f"; exit 1; }
done
soname=$(readelf -d "$prefix/lib/libkronos.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libkronos.so.0" ] || { echo "SONAME is '$soname'"; exit 1; }

# Only kr_ symbols, each declared KR_API in a public header, or KR_PRIVATE in a header of src/
# (what kronos' own code above reaches through the library: libkronos-tools, the binary).
public_exports=""
for lib in libkronos.so libkronos-tools.so; do
  # AddressSanitizer adds an __odr_asan.<name> beside each exported variable (its one-definition
  # check); it is the sanitizer's, not an export of the library's.
  exports=$(nm -D --defined-only "$prefix/lib/$lib" | awk '{print $3}' | grep -v '^__odr_asan\.' || true)
  bad=$(echo "$exports" | grep -v '^kr_' || true)
  [ -z "$bad" ] || { echo "$lib exports beyond the API:"; echo "$bad"; exit 1; }
  n_public=0 n_private=0
  for sym in $exports; do
    if grep -rhw "$sym" "$prefix/include" | grep "KR_API" >/dev/null; then
      n_public=$((n_public + 1))
      public_exports="$public_exports $sym"
    elif grep -hw "$sym" "$src"/src/*/*.h | grep KR_PRIVATE >/dev/null; then
      n_private=$((n_private + 1))
    else
      echo "$lib exports $sym, neither KR_API in a public header nor KR_PRIVATE in src/"
      exit 1
    fi
  done
  echo "$lib: $n_public public functions, $n_private private ones (KR_PRIVATE)"
done
# ... and every KR_API function of the public headers is exported by one of them (a source
# file that defines it without seeing its KR_API declaration would leave it hidden).
all_exports=$(nm -D --defined-only "$prefix/lib/libkronos.so" "$prefix/lib/libkronos-tools.so" |
  awk '{print $3}')
missing=""
for sym in $(grep -h '^KR_API ' "$prefix"/include/kronos.h "$prefix"/include/kronos/*.h | grep -o '^KR_API [^(]*(' |
             sed 's/($//; s/.*[ *]//'); do
  grep -qxF "$sym" <<<"$all_exports" || missing="$missing $sym"
done
[ -z "$missing" ] || { echo "declared KR_API but not exported:$missing"; exit 1; }

# The core library depends on libc, libm, pthreads, cJSON and xxHash only: no database client,
# HTTP client or server (those are libkronos-tools').
core_deps=$(readelf -d "$prefix/lib/libkronos.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
for dep in $core_deps; do
  case $dep in
    ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libcjson.so.* | libxxhash.so.* | libasan.so.* | \
      libubsan.so.* | libtsan.so.* | libgcc_s.so.* | libstdc++.so.*) ;;
    *) echo "libkronos.so needs $dep: the core may need libc, libm, pthreads, cJSON, xxHash only"
       exit 1 ;;
  esac
done
echo "libkronos.so needs: $core_deps"

# A sanitizer build's library needs the ASan runtime first in the process ("ASan runtime does
# not come first"): build the consumer with the same sanitizers then.
san=""
if readelf -d "$prefix/lib/libkronos.so" | grep -q 'libasan'; then
  san="-fsanitize=address,undefined"
fi

# pkg-config sees the installed kronos.pc and nothing else (PKG_CONFIG_LIBDIR replaces the
# system's directories): the flags must come without the -dev packages of the libraries
# libkronos.so itself links (cJSON, xxHash, SQLite, libpq, libmicrohttpd, libcurl), which a
# program using the public headers never needs.
export PKG_CONFIG_LIBDIR=$prefix/lib/pkgconfig
unset PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs kronos) ||
  { echo "pkg-config --cflags --libs kronos fails with only the install's kronos.pc"; exit 1; }
cflags=$(pkg-config --cflags kronos)
if grep -Eq '^(Requires|Requires\.private|Libs\.private):' "$prefix/lib/pkgconfig/kronos.pc"; then
  echo "kronos.pc names dependencies of the shared library:"
  grep -E '^(Requires|Libs\.private)' "$prefix/lib/pkgconfig/kronos.pc"
  exit 1
fi

# Every public header compiles on its own, as C (c99 and c11, pedantic) and as C++ (c++11,
# pedantic: the extern "C" blocks must open and close where they should).
for h in "$prefix"/include/kronos.h "$prefix"/include/kronos/*.h; do
  rel=${h#"$prefix/include/"}
  for std in c99 c11; do
    printf '#include <%s>\nint kr_header_check_%s;\n' "$rel" "$std" |
      cc -std=$std -Wall -Wextra -pedantic -Werror $cflags -fsyntax-only -x c - ||
      { echo "$rel does not compile as C ($std)"; exit 1; }
  done
  if command -v c++ >/dev/null; then
    printf '#include <%s>\nextern "C" int kr_header_check(void);\nstatic_assert(sizeof(kr_status) > 0, "");\n' \
        "$rel" |
      c++ -std=c++11 -Wall -Wextra -pedantic -Werror $cflags -fsyntax-only -x c++ - ||
      { echo "$rel does not compile as C++ (c++11)"; exit 1; }
  fi
done
# And from C++ every exported function links by its C name: a declaration outside the
# extern "C" block would be looked for under a mangled one.
if command -v c++ >/dev/null; then
  {
    for h in "$prefix"/include/kronos.h "$prefix"/include/kronos/*.h; do
      echo "#include <${h#"$prefix/include/"}>"
    done
    echo 'typedef void (*kr_any_fn)(void);'
    echo 'static const kr_any_fn kr_all[] = {'
    functions=$(nm -D --defined-only "$prefix/lib/libkronos.so" "$prefix/lib/libkronos-tools.so" |
      awk '$2 == "T" { print $3 }')
    for sym in $public_exports; do echo "$functions" | grep -xF "$sym" || true; done | sed 's/.*/    reinterpret_cast<kr_any_fn>(\&&),/'
    echo '};'
    echo 'int main() { return kr_all[0] == nullptr; }'
  } >"$tmp/all.cpp"
  c++ -std=c++11 -Wall -Wextra -pedantic -Werror $san "$tmp/all.cpp" $flags -lkronos-tools \
      -Wl,-rpath,"$prefix/lib" \
      -o "$tmp/all_cxx" || { echo "the public API does not link from C++"; exit 1; }
  "$tmp/all_cxx" || { echo "the C++ consumer failed"; exit 1; }
fi
echo "public headers: each compiles alone as C99, C11 and C++11; every export links from C++"
cc -std=c11 -Wall -Wextra -Werror $san "$src/tests/install/consumer.c" \
   $flags -lm -lpthread -Wl,-rpath,"$prefix/lib" -o "$tmp/consumer"
"$tmp/consumer" "$prefix/share/kronos/models/kronos-demo"

# The binary is a client of the libraries like any other program: it loads the installed
# libkronos.so.0 and libkronos-tools.so.0 (its build sees no internal header but common/'s).
deps=$(ldd "$prefix/bin/kronos")
for lib in libkronos.so.0 libkronos-tools.so.0; do
  echo "$deps" | grep -q "$lib => $prefix/\(bin/../\)\?lib/" ||
    { echo "the installed kronos does not load $prefix/lib/$lib:"; echo "$deps"; exit 1; }
done

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
