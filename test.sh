#!/usr/bin/env bash
# Run every test of the project: vet, the Go suite (which drives the Python
# worker for CPU verification), short fuzzing of every parser.
set -euo pipefail
cd "$(dirname "$0")"
export CGO_ENABLED=0
scripts/ensure-torch
go vet ./...
go test -count=1 ./...
# The hostile side's own unit tests (CPU; CUDA cases skip without a GPU).
/usr/bin/python3 -B -m unittest discover -s python/tests
# Short fuzzing of the parsers (the seed corpora already ran above).
for target in internal/canon:FuzzCanonicalize internal/canon:FuzzDecode internal/safetensors:FuzzDecode; do
  pkg=${target%%:*}; fn=${target##*:}
  go test -run '^$' -fuzz "^${fn}\$" -fuzztime "${FUZZTIME:-10s}" "./$pkg" >/dev/null
  echo "fuzz ${pkg} ${fn}: ok"
done
