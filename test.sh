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
# Short fuzzing of every parser of untrusted bytes (their seed corpora
# already ran above as ordinary tests).
fuzz() {
  local pkg=$1; shift
  for fn in "$@"; do
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "${FUZZTIME:-8s}" "./$pkg" >/dev/null
    echo "fuzz ${pkg} ${fn}: ok"
  done
}
fuzz internal/canon FuzzCanonicalize FuzzDecode
fuzz internal/safetensors FuzzDecode
fuzz internal/bundle FuzzManifest FuzzExtract
fuzz internal/capability FuzzMetadata
fuzz internal/scan FuzzParseFacts
fuzz internal/arena FuzzParse
fuzz internal/stack FuzzReadCrown FuzzReadIntegrationRecord FuzzReadReleaseManifest
fuzz internal/release FuzzReadEnvelope FuzzCheckTar
fuzz internal/metric FuzzGrade
