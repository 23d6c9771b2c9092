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

// Exit codes shared by every command (exitTable words them for --help and
// the README).
const (
	ExitOK       = 0 // success
	ExitUsage    = 1 // the command line is wrong
	ExitFindings = 2 // the candidate or the input is at fault
	ExitInfra    = 3 // infrastructure could not establish a result
)

// exitTable is the one exit-status table, shown by cacheon --help.
const exitTable = `Exit status, the same for every command:
  0  ok
  1  usage: an unknown command or flag, a missing argument or required flag,
     a bad flag value, an output path that exists (without --force) or
     cannot be written
  2  the candidate or the input is at fault: scan findings, a failed check
     (a verify FAIL, an audit FAIL, a release that does not verify), or an
     input the command was given — bundle, archive, arena, stack, crown,
     review, record, manifest, key, release directory, chain directory,
     validator data directory — that is missing, unreadable or invalid, or
     an extrinsic the chain refused (a reveal that does not match its
     commitment)
  3  infrastructure: no result could be established (no python or torch,
     the sandbox, a worker or the engine failed, the chain node or the
     validator's PostgreSQL store could not be reached, a wait for
     finality ran out, or a validator's intake pass stopped on this
     machine's fault)

With --json, an error is one JSON object on standard output, with the same
exit status:
  {"error": "...", "exit_code": N, "kind": "usage|candidate|infrastructure"}`

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that Run exits with code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// inputErr marks err as the fault of an input the user named (exit 2).
func inputErr(err error) error { return withCode(ExitFindings, err) }

// silentExit ends a command with code after it already printed its result.
type silentExit struct{ code int }

func (e silentExit) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Build is what the build stamped into the binary.
type Build struct {
	// Revision is the source revision (-ldflags "-X main.revision=…"),
	// used when the Go build info carries none (-buildvcs=false).
	Revision string
	// Modified is "true" when the revision had uncommitted changes.
	Modified string
}

// app holds what every command shares: the streams, the context and the
// build.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	build  Build
}

// Run executes the command line args and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return RunBuild(ctx, Build{}, args, stdin, stdout, stderr)
}

// RunBuild is Run for a binary that knows its build.
func RunBuild(ctx context.Context, b Build, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, build: b}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var se silentExit
	if errors.As(err, &se) {
		return se.code
	}
	code := exitCode(err)
	fmt.Fprintf(stderr, "cacheon: %v\n", err)
	if wantsJSON(cmd, args) {
		_ = writeJSON(stdout, errorObject(err, code))
	}
	return code
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
candidate code only ever runs in a separate, sandboxed Python process.

` + exitTable,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return newUsageError(c, err.Error()) })
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
		a.chainCommand,
		a.minerCommand,
		a.validatorCommand,
		a.devnetCommand,
		a.eventsCommand,
	} {
		root.AddCommand(mk())
	}
	// cobra's completion command (bash, zsh, fish, powershell), made here
	// rather than at execution so that an unknown shell is a usage error.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" && c.RunE == nil {
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
	}
	usageOnArgs(root)
	return root
}
