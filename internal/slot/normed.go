package slot

import (
	"math"
	"slices"
)

// Serving's normed rows (session 21, class 6). The engine hands the MoE
// experts the output of the layer's RMS norm, so every row of x has one
// root mean square (the norm weight's; 1 in every shipped arena, whose
// norms are all ones). Verify's distributions never made rows alike in
// that way, and a kernel that dropped all but the top expert whenever
// four or more rows shared their RMS within 0.4 % passed
// (moe_unit_rms_tell). The serving case and half the others (a coin per
// case from the stream of argument NAME+".normed" at replay 0, the same
// in every call) scale every row of a Spec.NormedRows input to one RMS:
// 1 in the serving case and half of those others, else drawn per case
// in [0.25, 4). The row's shape (heavy tails, outliers) is kept.

// normRows scales the rows (of width last) of input a to one RMS where
// this case asks for it.
func (c *Case) normRows(a Arg, v []float64, last int) {
	if !slices.Contains(c.Spec.NormedRows, a.Name) || last == 0 {
		return
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, a.Name+".normed")
	if !c.Serving && g.uniform() >= 0.5 {
		return
	}
	target := 1.0
	if !c.Serving && g.uniform() < 0.5 {
		target = 0.25 * math.Pow(16, g.uniform())
	}
	for r := 0; r+last <= len(v); r += last {
		row := v[r : r+last]
		ss := 0.0
		for _, x := range row {
			ss += x * x
		}
		if ss == 0 {
			continue // a zero row (padding) stays zero
		}
		k := target / math.Sqrt(ss/float64(last))
		for i := range row {
			row[i] *= k
		}
	}
}
