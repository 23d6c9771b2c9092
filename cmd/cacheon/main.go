// Command cacheon is the validator-owned referee, market and release tool
// for GPU-kernel contributions. All commands live in internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"cacheon/internal/cli"
	"cacheon/internal/sandbox"
)

// Stamped at link time (run.sh: -ldflags "-X main.revision=… -X
// main.modified=…"); cacheon version falls back to them when the build
// info carries no VCS revision (-buildvcs=false). -X can only set package
// variables, so these are the binary's only ones.
var (
	revision string
	modified string
)

func main() {
	// A re-exec of this binary as a sandbox child applies its confinement
	// and exec's the worker; it never returns. Otherwise this returns at once.
	sandbox.MaybeRunChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.RunBuild(ctx, cli.Build{Revision: revision, Modified: modified}, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
