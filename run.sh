#!/usr/bin/env bash
# Build cacheon and run its main job on this machine.
set -euo pipefail
cd "$(dirname "$0")"
scripts/ensure-torch
# The revision is stamped at link time too, so that cacheon version names it
# also in a build without VCS stamping (-buildvcs=false, or no .git).
rev=$(git rev-parse HEAD 2>/dev/null || true)
dirty=false
if [ -n "$rev" ] && [ -n "$(git status --porcelain 2>/dev/null)" ]; then dirty=true; fi
CGO_ENABLED=0 go build -ldflags "-X main.revision=$rev -X main.modified=$dirty" -o .bin/cacheon ./cmd/cacheon
.bin/cacheon version
.bin/cacheon slots
.bin/cacheon targets
.bin/cacheon scan examples/silu_torch
.bin/cacheon verify examples/silu_torch --device cpu --dtype float32
# The main job: the whole system on this machine (docs/devnet.md). The
# first run plays the demo (five miners, one crown, a signed release) and
# keeps the devnet serving its dashboard until Ctrl-C; later runs (also
# after a demo that was interrupted) resume it. DEVNET_DIR picks the
# directory.
dir=${DEVNET_DIR:-.devnet}
if [ -e "$dir/demo.json" ] || [ -e "$dir/miners" ]; then
  exec .bin/cacheon devnet up --dir "$dir"
fi
exec .bin/cacheon devnet demo --dir "$dir" --keep
