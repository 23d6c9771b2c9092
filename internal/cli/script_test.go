package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"cacheon/internal/market/localchain"
	"cacheon/internal/sandbox"
	"cacheon/internal/worker"
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
		Condition: scriptCondition,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits": exits, "chainurl": chainURL, "chainfinal": chainFinal, "httpserve": httpServe, "setmatch": setMatch,
		},
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

// scriptCondition answers the scripts' own conditions: [torch] holds when
// an interpreter with torch is found the way verify finds one.
func scriptCondition(cond string) (bool, error) {
	switch cond {
	case "torch":
		_, err := worker.FindPython(context.Background(), "")
		return err == nil, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

// chainfinal URL waits until the chain node at URL has finalized the head
// it had when called, so that everything included so far is final. It
// gives up after a minute.
func chainFinal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: chainfinal URL")
	}
	cl, err := localchain.NewClient(args[0], 10*time.Second)
	if err != nil {
		ts.Fatalf("chainfinal: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head, err := cl.Head(ctx)
	if err != nil {
		ts.Fatalf("chainfinal: head: %v", err)
	}
	for {
		fin, err := cl.Finalized(ctx)
		if err != nil {
			ts.Fatalf("chainfinal: block %d was not finalized: %v", head.Number, err)
		}
		if fin.Number >= head.Number {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// httpserve DIR VAR serves DIR over http://127.0.0.1:PORT for the rest of
// the script and sets VAR to that URL (an archive host for miners).
func httpServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: httpserve DIR VAR")
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(ts.MkAbs(args[0]))))
	ts.Defer(srv.Close)
	ts.Setenv(args[1], srv.URL)
}

// setmatch VAR FILE REGEXP sets VAR to REGEXP's first submatch in FILE
// (stdout and stderr name the last command's output).
func setMatch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: setmatch VAR FILE REGEXP")
	}
	re, err := regexp.Compile("(?m)" + args[2])
	if err != nil {
		ts.Fatalf("setmatch: %v", err)
	}
	if re.NumSubexp() < 1 {
		ts.Fatalf("setmatch: %s has no submatch", args[2])
	}
	text := ts.ReadFile(args[1])
	m := re.FindStringSubmatch(text)
	if m == nil {
		ts.Fatalf("setmatch: no match for %s in %s", args[2], args[1])
	}
	ts.Setenv(args[0], m[1])
}
