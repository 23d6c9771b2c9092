package referee

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestControlErr: a calibration control that ended NO_DECISION is
// ErrUndecided (measure again); one that ended the wrong decision is not.
func TestControlErr(t *testing.T) {
	for _, tc := range []struct {
		v         Verdict
		want      Outcome
		undecided bool
	}{
		{Because(ReasonDeviceDegraded, "incumbent read off its envelope"), Fail, true},
		{Because(ReasonDrift, "s above n"), Pass, true},
		{Verdict{Outcome: Pass}, Fail, false},
		{Because(ReasonNotFaster, "r below the bar"), Pass, false},
	} {
		err := controlErr("negative", tc.v, tc.want, "why")
		if got := errors.Is(err, ErrUndecided); got != tc.undecided {
			t.Errorf("%v: errors.Is(ErrUndecided) = %v, want %v (%v)", tc.v, got, tc.undecided, err)
		}
		if !strings.Contains(err.Error(), "ended "+tc.v.String()) {
			t.Errorf("%v: message %q does not name the verdict", tc.v, err)
		}
		var ce *ControlError
		if !errors.As(fmt.Errorf("devnet: %w", err), &ce) || ce.Verdict != tc.v {
			t.Errorf("%v: not a *ControlError through a wrap: %v", tc.v, err)
		}
	}
}
