package fault

import (
	"errors"
	"fmt"
	"testing"
)

func TestOf(t *testing.T) {
	base := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		want Party
	}{
		{"unattributed", base, Usage},
		{"candidate", CandidateErr(base), Candidate},
		{"infra", InfraErr(base), Infra},
		{"wrapped keeps the party", fmt.Errorf("step: %w", InfraErr(base)), Infra},
		{"outermost wins", CandidateErr(fmt.Errorf("step: %w", InfraErr(base))), Candidate},
		{"explicit usage overrides", UsageErr(CandidateErr(base)), Usage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Of(tc.err); got != tc.want {
				t.Errorf("Of = %v, want %v", got, tc.want)
			}
			if !errors.Is(tc.err, base) || tc.err.Error() != "boom" && !errors.Is(tc.err, base) {
				t.Errorf("the chain lost the cause: %v", tc.err)
			}
		})
	}
	if CandidateErr(nil) != nil || InfraErr(nil) != nil || UsageErr(nil) != nil {
		t.Error("attributing nil must stay nil")
	}
}
