#!/usr/bin/env bash
# Checks that every C++ file git tracks is formatted as .clang-format says (clang-format 14, Debian
# 12's); prints the files that are not and exits non-zero. With --fix, formats them in place.
#   bash scripts/check-format.sh          # check (what scripts/test.sh runs)
#   bash scripts/check-format.sh --fix    # format the tree
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v clang-format >/dev/null 2>&1; then
  echo "check-format: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  echo "check-format: formatted ${#files[@]} files"
  exit 0
fi
unformatted=()
for file in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$file" >/dev/null 2>&1; then
    unformatted+=("$file")
  fi
done
if [[ ${#unformatted[@]} -gt 0 ]]; then
  echo "check-format: ${#unformatted[@]} of ${#files[@]} files are not formatted (bash scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "check-format: all ${#files[@]} files formatted ($(clang-format --version | head -1))"
