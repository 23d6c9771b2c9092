package slot

import (
	"fmt"

	"cacheon/internal/tensor"
)

// The deep MoE finalize's inputs (collective.moe_finalize_ar_rmsnorm):
// row_map (generator "row_map", K*(T+PAD) entries) picks, at
// row_map[k*(T+PAD)+t], the row of gemm_out (the input whose first
// dimension is row_map's range, (T+PAD)*K) that holds token t's k-th
// expert output, weighted by scales[t, k] (generator "topk_weights",
// (T+PAD, K)); only the first T tokens are real.
//
// The serving engine (stock.deep_experts) always passes one layout: the
// K-major map row_map[k*(T+PAD)+t] = t*K+k, zero scales on the padding
// tokens (t >= T) and zero gemm_out rows for them (rows T*K and up).
// Until session 14 verify passed a uniformly random permutation and drawn
// padding, so a kernel could test row_map for the K-major map and be
// honest only when graded (moe_finalize_layout_tell). Now, per case (the
// layout coin: the stream of argument "row_map.layout" at replay 0, so
// every call of a case agrees), the serving case (CaseParams.Serving) and
// three of four other cases pass exactly the serving layout; the rest
// pass the general layout the contract allows: a random permutation
// (from row_map's own stream, new in every call)
// with, at even odds (a second uniform of the layout stream), the rows it
// sends the padding tokens to and the padding tokens' scales zero, else
// drawn. A kernel must handle both, and zero padding does not mark the
// K-major map.

// finalizeLayout describes the row_map layout of a case of a slot with a
// row_map argument: ok is false for every other slot.
type finalizeLayout struct {
	ok      bool
	arg     Arg
	t, texp int // real tokens and padded tokens (T, T+PAD)
	k       int
	served  bool // the serving engine's K-major map
	zeroPad bool // padding tokens' scales and gemm_out rows zero
}

// layout returns the case's finalize layout (see above).
func (c *Case) layout() finalizeLayout {
	var rm Arg
	found := false
	for _, a := range c.Spec.Args {
		if a.Kind == ArgInput && a.Gen == "row_map" {
			rm, found = a, true
		}
	}
	if !found {
		return finalizeLayout{}
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, rm.Name+".layout")
	served := g.uniform() < 0.75 || c.Serving // the serving case: always the engine's
	zeroPad := g.uniform() < 0.5 || served
	t, pad, k := c.Dims["T"], c.Dims["PAD"], c.Dims["K"]
	return finalizeLayout{ok: true, arg: rm, t: t, texp: t + pad, k: k, served: served, zeroPad: zeroPad}
}

// rowMap returns the case's row_map at the current call (c.Replay): the
// K-major map in the serving layout, else a permutation of its rows
// drawn from g, the stream of row_map at this call (row_map is shared
// by the ranks, so every rank sees the same map).
func (l finalizeLayout) rowMap(g *rng) ([]int64, error) {
	n := l.texp * l.k
	if l.t < 0 || l.texp < l.t || l.k < 1 {
		return nil, fmt.Errorf("row_map needs dims T <= T+PAD and K >= 1 (T=%d, T+PAD=%d, K=%d)", l.t, l.texp, l.k)
	}
	v := make([]int64, n)
	if l.served {
		for k := 0; k < l.k; k++ {
			for t := 0; t < l.texp; t++ {
				v[k*l.texp+t] = int64(t*l.k + k)
			}
		}
		return v, nil
	}
	for i, p := range g.perm(n) {
		v[i] = int64(p)
	}
	return v, nil
}

// rowMapValues is generator "row_map".
func (c *Case) rowMapValues(g *rng, dt tensor.DType, shape []int, n, bound int) (*tensor.Tensor, error) {
	l := c.layout()
	if !l.ok || n != bound || n != l.texp*l.k {
		return nil, fmt.Errorf("row_map has %d entries for %d rows (K*(T+PAD) = %d)", n, bound, l.texp*l.k)
	}
	v, err := l.rowMap(g)
	if err != nil {
		return nil, err
	}
	return tensor.FromInt64(dt, shape, v)
}

// zeroPadding zeroes, in a case whose layout has zero padding, the rows
// of a freshly drawn input a (row-major values v of the given shape) that
// belong to the padding tokens: scales' rows T and up, and the gemm_out
// rows the row_map of this call sends the padding tokens to. Other
// inputs are left alone.
func (c *Case) zeroPadding(a Arg, shape []int, v []float64) error {
	l := c.layout()
	if !l.ok || !l.zeroPad || len(shape) != 2 {
		return nil
	}
	cols := shape[1]
	switch {
	case a.Gen == "topk_weights" && shape[0] == l.texp && cols == l.k:
		clear(v[l.t*cols:])
	case len(l.arg.Range) > 0 && len(a.Shape) == 2 && a.Shape[0] == l.arg.Range && shape[0] == l.texp*l.k:
		rm, err := l.rowMap(newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, c.Replay, 0, l.arg.Name))
		if err != nil {
			return err
		}
		for k := 0; k < l.k; k++ {
			for t := l.t; t < l.texp; t++ {
				r := int(rm[k*l.texp+t])
				clear(v[r*cols : (r+1)*cols])
			}
		}
	}
	return nil
}
