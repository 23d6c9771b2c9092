package slot

import (
	"fmt"
	"math"

	"cacheon/internal/tensor"
)

// Sink values (session 35). A trained model's attention sinks are no-ops:
// the sink token's value row has a small norm beside the others, so the
// mass a query parks on the sink adds little to its output. Verify's sink
// keys carried value rows drawn like every other, and a kernel that
// attended only to the first keys and a recent window whenever position
// 0's value norm was a small share of the rest's median
// (sdpa_sink_smallv_window, decode_sink_smallv_window: StreamingLLM's
// window under a trained model's tell) passed every row and the served
// stage, whose arenas carry random weights.
//
// In three calls of four that get sinks (a coin of the stream of argument
// "sinks.values"), the sinks' value rows are scaled down, per KV head, by
// the call's factor log-uniform over [sinkValueMin, 1] times one
// log-uniform over [1/sinkValueJitter, sinkValueJitter] per head and sink:
// the ratio of a sink's value norm to the rest's ranges from under a
// hundredth up to about one, alike in every head (a trained model's) or
// not. A call's first sinks are scaled; its further sinks (sinkCount)
// share the scaling at odds of one in three (a coin of the same stream)
// and else keep their values, so that a lone small value row among rows
// alike (the tell above) comes with every count of sinks.
//
// The long sequences such a window cuts come mostly from the probe
// shapes, whose calls all have sinks (sinkCount). There every call scales
// its sinks' values, the call's factor drawn from one of sinkValueStrata
// equal strata of the log range, in turn from a stratum drawn per case
// (the stream of argument "sinks.values.probe"): any three calls of a
// probe case meet every stratum, and as the sink counts go in fours,
// twelve calls meet every pair of count and stratum. The other value rows
// stay as drawn; the reference grades the outputs as ever.
const (
	sinkValueOdds   = 0.75
	sinkValueMin    = 1.0 / 128
	sinkValueJitter = 1.25
	sinkValueStrata = 3
)

// sinkValues scales the value rows of the sinks (weight: each key row's
// sink weight, sinkRows) in rank's value input, for the call of number
// replay on rank r (see above). A slot whose SinkSpec names no value is
// left alone.
func (c *Case) sinkValues(rank map[string]*tensor.Tensor, replay, r int, weight []float64, hkv, d int) error {
	ss := c.Spec.Sinks
	if ss.Value == "" {
		return nil
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, r, "sinks.values")
	lo, hi := 0.0, 1.0 // the share of the log range the factor is drawn from
	if c.probe() {
		off := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, r, "sinks.values.probe").intn(sinkValueStrata)
		k := (off + replay) % sinkValueStrata
		lo, hi = float64(k)/sinkValueStrata, float64(k+1)/sinkValueStrata
	} else if g.uniform() >= sinkValueOdds {
		return nil
	}
	v := rank[ss.Value]
	if v == nil {
		return fmt.Errorf("slot %s: sink values: input %s missing", c.Spec.Name, ss.Value)
	}
	if v.NumElements() != len(weight)*hkv*d {
		return fmt.Errorf("slot %s: sink values: %s %v does not match the keys' %d rows of %d heads of %d", c.Spec.Name, ss.Value, v.Shape, len(weight), hkv, d)
	}
	// Only the sinks' rows are read and written (a cache holds millions
	// of elements, its sinks a few rows).
	spans := weightedRows(weight, hkv*d)
	vv := v.Float64sOf(spans)
	if vv == nil {
		return fmt.Errorf("slot %s: sink values: %s %v is not a tensor", c.Spec.Name, ss.Value, v.Shape)
	}
	base := sinkValueMin * math.Exp((lo+(hi-lo)*g.uniform())*math.Log(1/sinkValueMin))
	further := g.uniform() < 1.0/3
	at := 0
	for _, w := range weight {
		if w == 0 {
			continue
		}
		x := vv[at : at+hkv*d]
		at += hkv * d
		if w < 1 && !further {
			continue
		}
		for j := range hkv {
			f := base * math.Exp((2*g.uniform()-1)*math.Log(sinkValueJitter))
			for e := range d {
				x[j*d+e] *= f
			}
		}
	}
	nv, err := v.RewriteOf(spans, vv)
	if err != nil {
		return fmt.Errorf("slot %s: sink values: %w", c.Spec.Name, err)
	}
	rank[ss.Value] = nv
	return nil
}
