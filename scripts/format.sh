#!/usr/bin/env bash
# clang-format over every tracked C++ source. --check: list files that need formatting, exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.cc' '*.h' | while read -r f; do [[ -f "$f" ]] && echo "$f"; done)
if [[ ${#files[@]} -eq 0 ]]; then exit 0; fi
if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [[ ${#bad[@]} -gt 0 ]]; then
    echo "clang-format: these files need formatting (run 'make format'):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "clang-format: ${#files[@]} files clean"
else
  clang-format -i "${files[@]}"
fi
