#!/usr/bin/env bash
# Fails when a C++ file of the tree differs from what clang-format (.clang-format) makes of it.
# Run by the test suite; `make format` fixes what it reports.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "clang-format is not installed: run scripts/setup.sh" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h')
clang-format --dry-run --Werror "${files[@]}"
echo "format_check: ${#files[@]} files match .clang-format"
