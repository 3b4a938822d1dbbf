#!/usr/bin/env bash
# Fails when a C file of the project is not formatted as .clang-format says, naming the files
# (fix with: clang-format -i FILE). Skips (77) when clang-format is not installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v clang-format >/dev/null || { echo "SKIPPED: clang-format not installed"; exit 77; }
mapfile -t files < <(find src include tests bench fuzz python -name '*.[ch]' 2>/dev/null | sort)
if ! out=$(clang-format --dry-run -Werror "${files[@]}" 2>&1); then
  echo "$out" | grep -o '^[^:]*\.[ch]' | sort -u | sed 's/^/not formatted (clang-format -i): /'
  exit 1
fi
echo "${#files[@]} files formatted as .clang-format says"
