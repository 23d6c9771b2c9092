#!/usr/bin/env bash
# Run every test of the project: vet, the Go suite (which drives the Python
# worker for CPU verification), short fuzzing of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")"
export CGO_ENABLED=0
scripts/ensure-torch
scripts/ensure-postgres
scripts/ensure-chromium
go vet ./...
go test -count=1 -skip '^TestDemo$' ./...
# The devnet demo measures speed on the CPU arena (a deliberately slow
# incumbent against an honest kernel, docs/devnet.md): it runs after the
# rest and alone, so that the suite's other packages do not load the
# machine under its reads.
go test -count=1 -run '^TestDemo$' ./internal/devnet
# The hostile side's own unit tests (CPU; CUDA cases skip without a GPU).
/usr/bin/python3 -B -m unittest discover -s python/tests
# Short fuzzing of every fuzz target in the module (their seed corpora
# already ran above as ordinary tests): every parser of untrusted bytes has
# one, and a new target joins here without editing this file.
go test -list '^Fuzz' ./... | awk '
  /^Fuzz/ { fns[n++] = $1; next }
  /^ok/   { for (i = 0; i < n; i++) print $2, fns[i]; n = 0 }' |
while read -r pkg fn; do
  for try in 1 2; do
    if out=$(go test -run '^$' -fuzz "^${fn}\$" -fuzztime "${FUZZTIME:-5s}" "$pkg" 2>&1); then
      echo "fuzz ${pkg#cacheon/} ${fn}: ok"; continue 2
    fi
    # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as
    # a failure ("context deadline exceeded", no failing input written) on
    # a loaded machine (go.dev/issue/75804, fixed in Go 1.27): that one
    # outcome is run once more; anything else fails at once.
    if [ "$try" = 1 ] && grep -q 'context deadline exceeded' <<<"$out" &&
       ! grep -q 'Failing input written\|panic:\|_test.go:[0-9]' <<<"$out"; then
      echo "fuzz ${pkg#cacheon/} ${fn}: the coordinator's deadline race (go.dev/issue/75804); once more"
      continue
    fi
    echo "$out"; echo "fuzz ${pkg#cacheon/} ${fn}: FAILED"; exit 1
  done
done
