package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"cacheon/internal/sandbox"
)

// TestMain lets script tests run the cacheon command in-process: the test
// binary re-executes itself as "cacheon".
func TestMain(m *testing.M) {
	// The sandbox re-executes this binary as its child: let it.
	sandbox.MaybeRunChild()
	testscript.Main(m, map[string]func(){
		"cacheon": func() {
			os.Exit(Run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// TestScripts runs the txtar CLI scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: false,
		Setup: func(env *testscript.Env) error {
			// Scripts that need the repository (examples, python runtime)
			// find it here.
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			env.Setenv("REPO", wd+"/../..")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"exits": exits, "chainurl": chainURL},
	})
}

// exits N PROGRAM [ARGS...] runs PROGRAM like exec and wants exit status N
// exactly (its stdout and stderr stay for the next stdout/stderr checks).
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits %q: want a number", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// chainurl FILE VAR waits until a background cacheon chain serve has
// written its URL to FILE (--url-file) and sets VAR to it. It gives up
// after a minute: a node that never starts fails the script, it is no
// measurement.
func chainURL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: chainurl FILE VAR")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(ts.MkAbs(args[0]))
		if err == nil && strings.HasSuffix(string(b), "\n") {
			ts.Setenv(args[1], strings.TrimSpace(string(b)))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("chainurl: %s did not appear within a minute: %v", args[0], err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
