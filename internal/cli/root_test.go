package cli

import (
	"errors"
	"fmt"
	"testing"

	"cacheon/internal/fault"
)

// TestExitCode: the one mapping from an error to the exit status.
func TestExitCode(t *testing.T) {
	base := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"unattributed is usage", base, ExitUsage},
		{"candidate", fault.CandidateErr(base), ExitFindings},
		{"infrastructure", fmt.Errorf("step: %w", fault.InfraErr(base)), ExitInfra},
		{"a command's own code wins", withCode(ExitInfra, fault.CandidateErr(base)), ExitInfra},
	} {
		if got := exitCode(tc.err); got != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.code)
		}
	}
}
