package cli

import (
	"context"
	"os"
	"testing"

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
	})
}
