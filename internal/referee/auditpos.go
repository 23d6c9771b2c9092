package referee

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"cacheon/internal/engine"
	"cacheon/internal/splitmix"
)

// maxPositions is the most calls of one slot A is told to dump (the
// runtime's own bound, auditdump.MAX_CALLS).
const maxPositions = 4096

// auditPositions draws, for each slot of the proposal, the selected calls
// of A's timed waves that A dumps. A runs the waves C's timed read ran, so
// it selects the candidate N times in them, N being what C's timed waves
// selected (timed). Of those N calls it dumps k = ceil(share·N), at least
// minAudited and at most maxDumps shared among the slots (and never more
// than N): always the last one, so a kernel that turns wrong after some
// call and stays wrong is caught, and k−1 others distinct and uniform over
// the rest (Floyd's algorithm), from a stream of the attempt's secret, so
// that late calls are as likely as early ones. The numbers are counted
// from the engine's load, as the counters count them: before (A's counters
// once its warm-up has run) plus the position in the timed waves.
func auditPositions(secret []byte, slots []string, timed, before map[string]engine.SlotCounters, share string, maxDumps, minAudited int) (map[string][]int, error) {
	f, err := strconv.ParseFloat(share, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return nil, fmt.Errorf("audit share %q is not a decimal in [0, 1]", share)
	}
	per := maxDumps
	if len(slots) > 0 {
		per = maxDumps / len(slots)
	}
	out := map[string][]int{}
	for _, s := range slots {
		n := int(timed[s].Selected)
		if n <= 0 {
			continue
		}
		k := int(math.Ceil(f * float64(n)))
		k = min(max(min(k, per), minAudited, 1), n, maxPositions)
		rng := splitmix.New(uint64(seedOf(secret, "audit-positions:"+s)))
		chosen := map[int]bool{n - 1: true}
		for j := n - k; j < n-1; j++ {
			t := rng.IntnUnbiased(j + 1)
			if chosen[t] {
				t = j
			}
			chosen[t] = true
		}
		base := int(before[s].Selected)
		calls := make([]int, 0, len(chosen))
		for c := range chosen {
			calls = append(calls, base+c)
		}
		slices.Sort(calls)
		out[s] = calls
	}
	return out, nil
}
