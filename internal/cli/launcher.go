package cli

import (
	"cacheon/internal/verify"
	"cacheon/internal/worker"
)

// newLauncher wires the sandboxed worker launcher for verify and the
// engine: candidate code never runs outside it. readOnly adds paths the
// worker may read besides the bundle and the runtime.
func newLauncher(bundleDir, runtimeParent, python, device string, readOnly ...string) (verify.Launcher, error) {
	return worker.NewSandboxLauncher(bundleDir, runtimeParent, python, device, readOnly...)
}
