package cli

import (
	"context"

	"cacheon/internal/verify"
	"cacheon/internal/worker"
)

// plainLauncher starts workers without confinement. It is used only until
// the sandbox is wired and says so in every report.
type plainLauncher struct{}

func (plainLauncher) Single(context.Context) (worker.Starter, error) {
	return worker.PlainStarter{}, nil
}

func (plainLauncher) Group(context.Context, int) (worker.Starter, func(), error) {
	return worker.PlainStarter{}, func() {}, nil
}

func (plainLauncher) Layers() []string {
	return []string{"process group: applied", "confinement: NOT APPLIED (no sandbox layers)"}
}

func newLauncher(bundleDir, runtimeParent, python, device string) (verify.Launcher, error) {
	return plainLauncher{}, nil
}
