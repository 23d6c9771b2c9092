package engine

import (
	"errors"
	"strings"
	"testing"

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
