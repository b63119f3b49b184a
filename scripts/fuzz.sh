#!/usr/bin/env bash
# Runs every fuzz target in the module for $1 (default 30s) each. The seed
# corpora (testdata/fuzz/<Target>/) also run as plain tests in `make test`.
# New crashers land in testdata/fuzz/<Target>/: commit them with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-30s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for fn in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    echo "== $pkg $fn ($T)"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$T" "$pkg"
  done
done
