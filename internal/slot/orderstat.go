package slot

import "slices"

// sortedAt returns the value a sorted copy of xs holds at index k (0 <=
// k < len(xs)), exactly, in expected linear time: xs is reordered in
// place (a quickselect with three-way partitions, so runs of equal values,
// zeros above all, cost one pass). The generator's robust deviations
// (1.4826 times a median absolute value) read one order statistic of a
// row or a head's keys; sorting every such slice took a seventh of a silu
// verify's Go time (session 37).
func sortedAt(xs []float64, k int) float64 {
	lo, hi := 0, len(xs) // the answer lies in xs[lo:hi]
	for hi-lo > 16 {
		// the median of three as pivot: the generator's values are
		// drawn, not chosen against it
		a, b, c := xs[lo], xs[lo+(hi-lo)/2], xs[hi-1]
		p := max(min(a, b), min(max(a, b), c))
		// xs[lo:lt] < p, xs[lt:gt] == p, xs[gt:hi] > p
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch x := xs[i]; {
			case x < p:
				xs[lt], xs[i] = xs[i], xs[lt]
				lt++
				i++
			case x > p:
				gt--
				xs[gt], xs[i] = xs[i], xs[gt]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k >= gt:
			lo = gt
		default:
			return p
		}
	}
	slices.Sort(xs[lo:hi])
	return xs[k]
}
