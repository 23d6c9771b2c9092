#!/usr/bin/env bash
# Build cacheon and run its main job on this machine.
set -euo pipefail
cd "$(dirname "$0")"
scripts/ensure-torch
CGO_ENABLED=0 go build -o .bin/cacheon ./cmd/cacheon
.bin/cacheon version
.bin/cacheon slots
.bin/cacheon targets
.bin/cacheon scan examples/silu_torch
.bin/cacheon verify examples/silu_torch --device cpu --dtype float32
