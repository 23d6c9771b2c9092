#!/usr/bin/env bash
# Run every test of the project: vet, the Go suite (which drives the Python
# worker for CPU verification), short fuzzing of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")"
export CGO_ENABLED=0
# stage NAME: the time since the last stage, on stderr, so that a CI log
# says where its minutes went (docs/performance.md, "CI").
last=$SECONDS
stage() { echo "test.sh: $1 took $((SECONDS - last))s (total $((SECONDS / 60))m$((SECONDS % 60))s)" >&2; last=$SECONDS; }
scripts/ensure-torch
scripts/ensure-postgres
scripts/ensure-chromium
stage "setup"
go vet ./...
stage "go vet"
# A package's tests may take longer than go test's default 10 minutes on a
# loaded 2-core machine (verify's drive hundreds of sandboxed workers).
# The verify package, the longest by far, is named first so that go test
# starts it first (it runs packages in the order given): the others then
# run beside it instead of leaving it alone at the end. Since session 31
# (three scene replays a case) it took 36 minutes on a machine loaded
# besides; 60 minutes still stops a hang well inside CI's 90.
go test -count=1 -timeout 60m -skip '^TestDemo$' ./internal/verify ./...
stage "go test"
# The devnet demo measures speed on the CPU arena (a deliberately slow
# incumbent against an honest kernel, docs/devnet.md): it runs after the
# rest and alone, so that the suite's other packages do not load the
# machine under its reads.
go test -count=1 -timeout 20m -run '^TestDemo$' ./internal/devnet
stage "the devnet demo"
# The hostile side's own unit tests (CPU; CUDA cases skip without a GPU).
/usr/bin/python3 -B -m unittest discover -s python/tests
stage "python unittest"
# Short fuzzing of every fuzz target in the module (their seed corpora
# already ran above as ordinary tests): every parser of untrusted bytes has
# one, and a new target joins here without editing this file. Targets run
# $FUZZ_JOBS at a time (default: one per core), each with one fuzzing
# worker for $FUZZTIME (scripts/fuzz-one), so that one target's build
# overlaps another's fuzzing; a package's instrumented test binary is
# built once, in a directory of this run's, for all its targets.
FUZZ_BIN_DIR=$(mktemp -d)
export FUZZ_BIN_DIR
trap 'rm -rf "$FUZZ_BIN_DIR"' EXIT
go test -list '^Fuzz' ./... | awk '
  /^Fuzz/ { fns[n++] = $1; next }
  /^ok/   { for (i = 0; i < n; i++) print $2, fns[i]; n = 0 }' |
  xargs -n 2 -P "${FUZZ_JOBS:-$(nproc)}" scripts/fuzz-one
stage "fuzzing"
