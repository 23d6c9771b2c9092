// Package cli implements the cacheon command line. Each command lives in its
// own file; exit codes are decided here and nowhere else.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"cacheon/internal/fault"
)

// Exit codes shared by every command.
const (
	ExitOK       = 0 // success
	ExitUsage    = 1 // bad usage, unreadable input, I/O error
	ExitFindings = 2 // the input was judged and failed (scan findings, verify FAIL)
	ExitInfra    = 3 // infrastructure could not establish a result
)

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that Run exits with code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// silentExit ends a command with code after it already printed its result.
type silentExit struct{ code int }

func (e silentExit) Error() string { return fmt.Sprintf("exit %d", e.code) }

// app holds what every command shares: the streams and the context.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var se silentExit
	if errors.As(err, &se) {
		return se.code
	}
	fmt.Fprintf(stderr, "cacheon: %v\n", err)
	return exitCode(err)
}

// exitCode is the one mapping from an error to the exit status: a code a
// command chose (withCode) first, else the party the domain blamed.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	switch fault.Of(err) {
	case fault.Candidate:
		return ExitFindings
	case fault.Infra:
		return ExitInfra
	}
	return ExitUsage
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "cacheon",
		Short: "Referee, market and release pipeline for GPU-kernel contributions",
		Long: `cacheon checks untrusted GPU-kernel proposals for registered slots of an
inference engine against trusted references, measures them, and ships reviewed
contributions in signed releases. Everything trusted runs in this binary;
candidate code only ever runs in a separate, sandboxed Python process.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	for _, mk := range []func() *cobra.Command{
		a.versionCommand,
		a.slotsCommand,
		a.targetsCommand,
		a.scanCommand,
		a.packageCommand,
		a.verifyCommand,
		a.integrateCommand,
		a.releaseCommand,
		a.engineCommand,
		a.qualifyCommand,
		a.calibrateCommand,
		a.evidenceCommand,
	} {
		root.AddCommand(mk())
	}
	return root
}
