package engine

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cacheon/internal/fault"
	"cacheon/internal/worker"
)

func TestSessionAttribute(t *testing.T) {
	cand := &CandidateError{Step: "generate", Failure: &worker.Failure{Class: ClassCandidate, Message: "boom"}}
	load := &worker.Failure{Class: ClassLoad, Message: "import"}
	timeout := &worker.TimeoutError{}
	for _, tc := range []struct {
		name       string
		err        error
		candidates bool
		party      fault.Party
		note       bool // the error says a candidate may be why
	}{
		{"candidate", cand, true, fault.Candidate, false},
		{"load with candidates", load, true, fault.Candidate, false},
		{"load without", load, false, fault.Infra, false},
		{"died", &DiedError{Step: "generate", Err: errors.New("signal: killed")}, true, fault.Infra, false},
		{"oom", &worker.Failure{Class: ClassOOM}, true, fault.Infra, false},
		{"timeout with candidates", timeout, true, fault.Infra, true},
		{"timeout without", timeout, false, fault.Infra, false},
		{"forged reply with candidates", &worker.ProtocolError{Err: errors.New(`reply id "x" does not match request id "3"`)}, true, fault.Candidate, false},
		{"broken reply without", &worker.ProtocolError{Err: errors.New("decode reply")}, false, fault.Infra, false},
	} {
		s := &Session{}
		if tc.candidates {
			s.Stack = []StackRow{{Slot: "activation.silu_and_mul"}}
		}
		err := s.Attribute(tc.err)
		if got := fault.Of(err); got != tc.party {
			t.Errorf("%s: %v attributed to %v, want %v", tc.name, err, got, tc.party)
		}
		if note := strings.Contains(err.Error(), "one that never returns"); note != tc.note {
			t.Errorf("%s: %q: candidate note %v, want %v", tc.name, err, note, tc.note)
		}
	}
	if (&Session{}).Attribute(nil) != nil {
		t.Error("a nil error must stay nil")
	}
}

// TestSessionsSideBySide opens two sessions of one arena at once in one
// process, as the referee does (the incumbent stays resident while another
// engine runs): each has its own runtime and scratch directory, both
// answer, they agree token for token, and closing one leaves the other
// serving.
func TestSessionsSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two arena runtimes")
	}
	python, _ := realRuntime(t)
	a, cat := shippedArena(t, "cpu-tiny")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var sessions [2]*Session
	var errs [2]error
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sessions[i], errs[i] = Open(ctx, Config{Arena: a, Slots: cat, Python: python, Strict: true,
				LoadTimeout: 3 * time.Minute, ScratchRoot: t.TempDir()})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		t.Cleanup(func() { sessions[i].Close() })
	}
	if sessions[0].scratch == sessions[1].scratch {
		t.Fatal("two sessions share a scratch directory")
	}
	generate := func(s *Session) []int {
		t.Helper()
		reqs, _, err := s.PromptRequests(nil, 6)
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.Generate(ctx, reqs, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var toks []int
		for _, r := range g.Results {
			toks = append(toks, r.Tokens...)
		}
		return toks
	}
	first, second := generate(sessions[0]), generate(sessions[1])
	if len(first) == 0 || !slices.Equal(first, second) {
		t.Fatalf("two sessions of one arena disagree: %v vs %v", first, second)
	}
	if err := sessions[0].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sessions[0].scratch); !os.IsNotExist(err) {
		t.Fatalf("a closed session left its scratch directory: %v", err)
	}
	if again := generate(sessions[1]); !slices.Equal(again, second) {
		t.Fatalf("the remaining session changed its tokens after the other closed: %v vs %v", again, second)
	}
}
