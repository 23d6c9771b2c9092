package slot

import (
	"fmt"
	"math"
	"strings"

	"cacheon/internal/tensor"
)

// Attention sinks (session 18, class 7). In a served model a few keys
// (the first position's above all) score far above every other key for
// most queries, and the long tail of keys each far below the maximum
// still carries a real share of the softmax's mass because there are
// thousands of them. Verify's q and k were drawn independently, so each
// row's softmax was spread out: an attention kernel that skips every key
// scoring more than some margin below its row's maximum (a block-sparse
// "negligible tile" skip) lost almost nothing there and passed
// (decode_tail_skip, sdpa_tail_skip), while in serving, under a sink,
// it drops the tail.
//
// In three calls of four outside the serving case (a coin per call, the
// stream of argument "sinks"; a graph replay's sinks change only values),
// a slot with Spec.Sinks gets sinks: one a sequence, or in half of those
// calls 2 to 4 (sinkCount: session 18's second red-team pass skipped the
// tail only where two keys shared a row's top). Per KV head a unit direction u is
// drawn from the call's stream. The first sink key (key row 0 of sdpa;
// every sequence's first cached position in decode) is set along u at a
// norm drawn per KV head, a further one (at a drawn position) at a share
// of that norm plus a drawn direction off u, so that no two sinks are
// parallel; the other keys stay as drawn (a version that removed most of
// their component along u concentrated the tail, and a kernel told
// verify's sinks by it). Every query is aimed (aim): its component along
// its KV head's u and the scale of the rest are solved for so that the
// first sink scores a margin Δ above the mean score of the tail keys it
// meets and those scores spread by a drawn standard deviation (both
// measured on the keys as drawn, so shifted queries and heavy-tailed keys
// do not move them). A row's heads take one margin from each of equal
// strata of [sinkMin, sinkMaxFor(dtype) - ln(count)] in a drawn order,
// and one spread drawn per row: a tail concentrated just below a skip's
// threshold is where a skip drops the most. A tail of N keys a margin Δ
// below carries about N·e^-Δ/count of the mass, so the strata meet every
// threshold a skip could use in every format. Decode's graph pad rows
// are copies of the query row they copy. The reference grades every
// element as before; an honest kernel is exact at any margin.

// The range of a query's sink margin (score units), and the odds of a
// call having sinks.
const (
	sinkMin  = 3.0
	sinkOdds = 0.75
	// The standard deviation of a query row's tail scores is drawn
	// log-uniform over [sinkSpreadMin, sinkSpreadMax] (aim): it sets the
	// mass a tail of N keys a margin Δ below carries (about
	// N·e^(σ²/2 - Δ) for a spread σ).
	sinkSpreadMin = 0.05
	sinkSpreadMax = 2.5
	// Per KV head, the sink key's norm is sqrt(D) times a factor
	// log-uniform over [sinkNormMin, sinkNormMax] (one norm for every
	// head would be a tell of verify's sinks).
	sinkNormMin = 0.5
	sinkNormMax = 8.0
	// A call with sinks has one sink a sequence with odds
	// 1 - sinkMultiOdds, else 2 to sinkCountMax of them (a skip that
	// fired only where two or more keys share the row's top told verify's
	// single sink from a served model's several). A further sink's key is
	// the first's times a factor uniform over [sinkWeightMin, 1), plus a
	// drawn direction off u at a norm of the first's times one uniform
	// over [sinkOffMin, sinkOffMax), so that no two sinks are parallel.
	sinkMultiOdds = 0.5
	sinkCountMax  = 4
	sinkWeightMin = 0.85
	sinkOffMin    = 0.1
	sinkOffMax    = 0.5
)

// sinkMaxFor is the largest sink margin drawn for a query of dtype dt:
// the margin up to which a tail of a few thousand keys still carries
// more mass than the format's tolerance (about ln(N/tolerance): 13 for
// bfloat16 and float16 at 4096 keys, 20 for float32), so that the strata
// are as narrow as the thresholds a skip could use unseen.
func sinkMaxFor(dt tensor.DType) float64 {
	if dt == tensor.F32 || dt == tensor.F64 {
		return 20
	}
	return 13
}

// aimedQueryMax bounds an aimed query's elements in float16: a key
// head with almost no component along its sink direction asks aim for a
// huge factor, which overflowed float16 to inf (hs25 and rt25a: decode
// at seed 3, every bundle INFRA). 256 keeps a score of such a query
// against keys of the drawn sizes finite in float16 too.
const aimedQueryMax = 256

// capQuery scales an aimed query down, as a whole (its direction kept),
// where its largest element exceeds aimedQueryMax in float16; its margin
// is then less than aimed. Other formats hold any aimed value.
func capQuery(x []float64, dt tensor.DType) {
	if dt != tensor.F16 {
		return
	}
	var m float64
	for _, v := range x {
		m = max(m, math.Abs(v))
	}
	if m > aimedQueryMax {
		for e := range x {
			x[e] *= aimedQueryMax / m
		}
	}
}

// SinkSpec names the inputs the sinks are planted in: Query shaped
// [..., HQ, D] and Key shaped [..., HKV, D] (a paged cache [PAGES, PS,
// HKV, D]), Value shaped as Key (the sinks' value rows, sinkvalues.go),
// and the scalar that scales the scores.
type SinkSpec struct {
	Query, Key, Value, Scale string
}

// sinks plants the case's attention sinks in every rank's inputs for the
// call of number replay (see above); a no-op for a slot without
// Spec.Sinks, the serving case and the cases whose coin says no.
func (c *Case) sinks(replay int) error {
	ss := c.Spec.Sinks
	count := c.sinkCount(replay)
	if count == 0 {
		return nil
	}
	hq, hkv, d := c.Dims["HQ"], c.Dims["HKV"], c.Dims["D"]
	if hq < 1 || hkv < 1 || d < 1 || hq%hkv != 0 {
		return fmt.Errorf("slot %s: sinks: heads %d/%d, head dim %d", c.Spec.Name, hq, hkv, d)
	}
	scale := c.Scalars[ss.Scale]
	if !(scale > 0) {
		return fmt.Errorf("slot %s: sinks: scale %s = %v", c.Spec.Name, ss.Scale, scale)
	}
	for r, rank := range c.Ranks {
		g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, r, "sinks.plant")
		q, k := rank[ss.Query], rank[ss.Key]
		if q == nil || k == nil {
			return fmt.Errorf("slot %s: sinks: inputs %s, %s missing", c.Spec.Name, ss.Query, ss.Key)
		}
		qv, kv := q.Float64s(), k.Float64s()
		qRows, kRows := len(qv)/(hq*d), len(kv)/(hkv*d)
		if qRows*hq*d != len(qv) || kRows*hkv*d != len(kv) || kRows == 0 {
			return fmt.Errorf("slot %s: sinks: %s %v, %s %v do not end in heads and head dim", c.Spec.Name, ss.Query, q.Shape, ss.Key, k.Shape)
		}
		u, norm := make([][]float64, hkv), make([]float64, hkv)
		for j := range u {
			u[j] = unitVector(g, d)
			norm[j] = math.Sqrt(float64(d)) * sinkNormMin * math.Exp(g.uniform()*math.Log(sinkNormMax/sinkNormMin))
		}
		weight, seqs, err := c.sinkRows(g, rank, kRows, count)
		if err != nil {
			return err
		}
		// The tail keys (no sink) a query row meets: its decode
		// sequence's, or every key of sdpa's one sequence (the same for
		// every row: measured once).
		tails := make([]tailStats, max(1, len(seqs)))
		if seqs == nil {
			tails[0].mean, tails[0].sample = tailMean(kv, weight, nil, hkv, d)
		}
		for b, keys := range seqs {
			tails[b].mean, tails[b].sample = tailMean(kv, weight, keys, hkv, d)
		}
		// A sink stands above its tails: where a tail's mean leans along
		// u (keys with outlier channels of one sign, channels.go) by
		// more than half the drawn norm, the norm is twice that lean, so
		// that aim solves for the margin exactly.
		for j := range hkv {
			for _, ts := range tails {
				norm[j] = max(norm[j], 2*dot(u[j], ts.mean[j*d:(j+1)*d]))
			}
		}
		// The keys: each sequence's first sink along its KV head's u at
		// that head's norm; a further sink at a share of it plus a drawn
		// direction off u; the others as drawn.
		for row, w := range weight {
			if w == 0 {
				continue
			}
			for j := range hkv {
				x := kv[(row*hkv+j)*d : (row*hkv+j+1)*d]
				for e := range x {
					x[e] = w * norm[j] * u[j][e]
				}
				if w < 1 {
					// a direction of its own off u, at a drawn share
					v := unitVector(g, d)
					project(v, u[j])
					off := norm[j] * (sinkOffMin + (sinkOffMax-sinkOffMin)*g.uniform()) / math.Sqrt(max(dot(v, v), 1e-300))
					for e := range x {
						x[e] += off * v[e]
					}
				}
			}
		}
		// The queries, aimed at margin Δ and the row's spread. A row's
		// heads take one margin from each of hq equal strata of [sinkMin,
		// max], in a drawn order, so that every long sequence meets every
		// threshold a skip could use.
		margin := make([]float64, qRows*hq)
		spread := make([]float64, qRows*hq)
		step := (sinkMaxFor(q.DType) - math.Log(float64(count)) - sinkMin) / float64(hq)
		for row := range qRows {
			f := sinkSpreadMin * math.Exp(g.uniform()*math.Log(sinkSpreadMax/sinkSpreadMin))
			for h, stratum := range g.perm(hq) {
				margin[row*hq+h] = sinkMin + (float64(stratum)+g.uniform())*step
				spread[row*hq+h] = f
			}
		}
		for row := range qRows {
			ts := tails[0]
			if seqs != nil {
				if row >= len(seqs) {
					return fmt.Errorf("slot %s: sinks: %s has %d rows, the page table %d sequences", c.Spec.Name, ss.Query, qRows, len(seqs))
				}
				ts = tails[row]
			}
			mean, sample := ts.mean, ts.sample
			for h := range hq {
				x := qv[(row*hq+h)*d : (row*hq+h+1)*d]
				j := h / (hq / hkv)
				project(x, u[j])
				aim(x, u[j], mean[j*d:(j+1)*d], norm[j], tailScores{kv, sample, j, hkv, d}, scale, margin[row*hq+h], spread[row*hq+h])
				capQuery(x, q.DType)
			}
		}
		// Decode's graph pad rows stay copies of the row they copy.
		if p, src, ok := c.padPlan(); ok && c.Spec.Count != "" && q.Shape[0] == c.Dims[c.Spec.Count] && qRows == q.Shape[0] {
			n, w := q.Shape[0], hq*d
			for row := n - p; row < n; row++ {
				copy(qv[row*w:(row+1)*w], qv[src*w:(src+1)*w])
			}
		}
		if err := c.sinkValues(rank, replay, r, weight, hkv, d); err != nil {
			return err
		}
		nq, err := tensor.FromFloat64(q.DType, q.Shape, qv)
		if err != nil {
			return fmt.Errorf("slot %s: sinks: %w", c.Spec.Name, err)
		}
		nk, err := k.Rewrite(kv, weightedRows(weight, hkv*d))
		if err != nil {
			return fmt.Errorf("slot %s: sinks: %w", c.Spec.Name, err)
		}
		rank[ss.Query], rank[ss.Key] = nq, nk
	}
	return nil
}

// weightedRows is the element spans of the rows of width elements each
// whose weight is not zero (the sinks' rows): all that sinks and
// sinkValues change in a cache of millions of elements.
func weightedRows(weight []float64, width int) []tensor.Span {
	var spans []tensor.Span
	for row, w := range weight {
		if w != 0 {
			spans = append(spans, tensor.Span{Lo: row * width, N: width})
		}
	}
	return spans
}

// sinkCount is the number of sinks a sequence gets in the call of number
// replay: 0 for a slot without Spec.Sinks, the serving case and the calls
// whose coin says no; else 1, or 2 to sinkCountMax (sinkMultiOdds).
//
// A probe shape's calls (Spec.ProbeShapes: the long prefix and long
// sequences the sinks are planted for) all have sinks, 1 to sinkCountMax
// a sequence in turn from a count drawn per case (the stream of argument
// "sinks.probe" at replay 0; since session 22), so that any four calls of
// a probe case meet every count: with session 18's odds a probe's four
// calls had two or three sinks in none of them for about one seed in
// three, and a skip that fired only there (sdpa_multisink_skip) passed
// such seeds; with session 21's equal odds per call, one in sixteen.
func (c *Case) sinkCount(replay int) int {
	if c.Spec.Sinks == nil || c.Serving {
		return 0
	}
	if c.probe() {
		// The counts in turn from a drawn one, so that every four calls
		// of a probe case meet each count (a skip that fires only under
		// two or three sinks met them in some seeds only).
		off := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, 0, 0, "sinks.probe").intn(sinkCountMax)
		return 1 + (off+replay)%sinkCountMax
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, replay, 0, "sinks")
	if g.uniform() >= sinkOdds {
		return 0
	}
	if g.uniform() >= sinkMultiOdds {
		return 1
	}
	return 2 + g.intn(sinkCountMax-1)
}

// probe reports whether the case's shape is one of the slot's probe
// shapes (its name without the jitter's "~" or a count's "@n") or a
// drawn long sequence (sizes.go: drawn-mid, drawn-long), which the sinks
// are planted for as much.
func (c *Case) probe() bool {
	base, _, _ := strings.Cut(strings.TrimSuffix(c.Shape, "~"), "@")
	if longDraw(base) {
		return true
	}
	for _, sh := range c.Spec.ProbeShapes {
		if sh.Name == base {
			return true
		}
	}
	return false
}

// sinkRows gives every key row its sink weight: 1 for a sequence's first
// sink, a factor in [sinkWeightMin, 1) for a further one, 0 for a key
// that is no sink. For a paged cache every sequence that reaches no
// earlier sequence's sink (pages are shared) gets its first position and
// count-1 further positions of its own drawn; else key row 0 and count-1
// drawn rows. Every sink beyond the first shrinks the tail's share of
// the mass, so the margins' range ends ln(count) lower (sinks above).
func (c *Case) sinkRows(g *rng, rank map[string]*tensor.Tensor, kRows, count int) (weight []float64, seqs [][]int, err error) {
	weight = make([]float64, kRows)
	// further draws a sequence's further sinks among its positions 1 to
	// n-1 (a bounded number of draws: a table may map several positions
	// to one slot).
	further := func(slotOf func(pos int) int, n int) {
		for added, tries := 0, 0; n > 1 && added < count-1 && tries < 16*count; tries++ {
			if s := slotOf(1 + g.intn(n-1)); s >= 0 && weight[s] == 0 {
				weight[s] = sinkWeightMin + (1-sinkWeightMin)*g.uniform()
				added++
			}
		}
	}
	table, lens, ps, ok := c.pagedArgs()
	if !ok {
		weight[0] = 1
		further(func(pos int) int { return pos }, kRows)
		return weight, nil, nil
	}
	v, n, width, ok, err := rankPages(rank, table, lens)
	if err != nil {
		return nil, nil, fmt.Errorf("slot %s: sinks: page table: %w", c.Spec.Name, err)
	}
	if !ok {
		return nil, nil, fmt.Errorf("slot %s: sinks: the call has no page table %s and lengths %s", c.Spec.Name, table.Name, lens.Name)
	}
	slotOf := func(b, pos int) int {
		if pos/ps >= width {
			return -1
		}
		if page := v[b*width+pos/ps]; page >= 0 && int(page)*ps+pos%ps < kRows {
			return int(page)*ps + pos%ps
		}
		return -1
	}
	// A sequence whose positions already reach a sink (pages shared with
	// an earlier sequence) takes no sink of its own.
	for b, l := range n {
		if b*width >= len(v) || l < 1 {
			continue
		}
		seen := false
		for pos := 0; pos < int(l) && !seen; pos++ {
			if s := slotOf(b, pos); s >= 0 && weight[s] != 0 {
				seen = true
			}
		}
		if s := slotOf(b, 0); !seen && s >= 0 {
			weight[s] = 1
			further(func(pos int) int { return slotOf(b, pos) }, int(l))
		}
	}
	seqs = make([][]int, len(n))
	for b, l := range n {
		for pos := 0; b*width < len(v) && pos < int(l); pos++ {
			if s := slotOf(b, pos); s >= 0 {
				seqs[b] = append(seqs[b], s)
			}
		}
	}
	return weight, seqs, nil
}

// aim sets a query x (projected off its sink direction u) to f·x + a·u so
// that its scores of the tail keys (tail, their mean kbar) have the
// standard deviation sigma and a mean margin below its score of the
// first sink (norm·u): a·scale·(norm - u·k̄) - f·scale·x·k̄ = margin and
// scale²·Var(f·x·k + a·u·k) = sigma², a quadratic in f (a is linear in
// it). The tail's own components along u spread its scores by a·u·k: a
// drawn spread too small to reach takes the least f (off-u spread 0.05),
// and a tail whose mean leans so far along u that norm - u·k̄ < norm/4
// takes a = margin/(scale·norm); a tail of fewer than two keys (no spread
// to measure) takes f = sigma, its margin still solved for. Fixing the mean and the spread, not
// only the query's norm, keeps the sinks what they are with a shifted
// query or heavy-tailed keys (whose tails reached the sink before).
func aim(x, u, kbar []float64, norm float64, tail tailScores, scale, margin, sigma float64) {
	vx, vu, cxu := tail.moments(x, u)
	f, a := sigma, margin/(scale*norm) // no tail to measure: session 18's rule
	if vx > 0 {
		f = sigma / (scale * math.Sqrt(vx))
	}
	if den := norm - dot(u, kbar); den > norm/4 {
		alpha, beta := margin/(scale*den), dot(x, kbar)/den
		if vx > 0 {
			qa := vx + 2*beta*cxu + beta*beta*vu
			qb := 2*alpha*cxu + 2*alpha*beta*vu
			qc := alpha*alpha*vu - (sigma/scale)*(sigma/scale)
			fmin := 0.05 / (scale * math.Sqrt(vx))
			f = fmin
			if disc := qb*qb - 4*qa*qc; qa > 0 && disc >= 0 {
				f = max(fmin, (-qb+math.Sqrt(disc))/(2*qa))
			}
		}
		a = alpha + beta*f // the margin exact, a one-key tail's too
	}
	for e := range x {
		x[e] = f*x[e] + a*u[e]
	}
}

// tailStats is one sequence's tail keys: their mean per KV head and a
// sample of them (tailMean).
type tailStats struct {
	mean   []float64
	sample []int
}

// tailScores is a sample of a KV head's tail keys: rows of kv.
type tailScores struct {
	kv        []float64
	sample    []int
	j, hkv, d int
}

// moments returns, over the sample, the variances of x·k and u·k and
// their covariance (zeros for fewer than two keys).
func (t tailScores) moments(x, u []float64) (vx, vu, cxu float64) {
	if len(t.sample) < 2 {
		return 0, 0, 0
	}
	var sx, su, sxx, suu, sxu float64
	for _, r := range t.sample {
		k := t.kv[(r*t.hkv+t.j)*t.d : (r*t.hkv+t.j+1)*t.d]
		a, b := dot(x, k), dot(u, k)
		sx, su, sxx, suu, sxu = sx+a, su+b, sxx+a*a, suu+b*b, sxu+a*b
	}
	n := float64(len(t.sample))
	mx, mu := sx/n, su/n
	return max(0, sxx/n-mx*mx), max(0, suu/n-mu*mu), sxu/n - mx*mu
}

// tailSample is the most key rows moments looks at.
const tailSample = 128

// tailMean is, per KV head, the mean of the key rows (all rows when keys
// is nil) that are no sink ([hkv*d], zeros where there are none), and up
// to tailSample of those rows, evenly spaced.
func tailMean(kv, weight []float64, keys []int, hkv, d int) (mean []float64, sample []int) {
	if keys == nil {
		keys = make([]int, len(weight))
		for r := range keys {
			keys[r] = r
		}
	}
	mean = make([]float64, hkv*d)
	var tail []int
	for _, r := range keys {
		if weight[r] != 0 {
			continue
		}
		tail = append(tail, r)
		for i, x := range kv[r*hkv*d : (r+1)*hkv*d] {
			mean[i] += x
		}
	}
	for i := range mean {
		if len(tail) > 0 {
			mean[i] /= float64(len(tail))
		}
	}
	step := max(1, (len(tail)+tailSample-1)/tailSample)
	for i := 0; i < len(tail); i += step {
		sample = append(sample, tail[i])
	}
	return mean, sample
}

// unitVector is a direction drawn uniformly on the unit sphere of R^d.
func unitVector(g *rng, d int) []float64 {
	for {
		u := make([]float64, d)
		norm := 0.0
		for i := range u {
			u[i] = g.normal()
			norm += u[i] * u[i]
		}
		if norm > 0 {
			norm = math.Sqrt(norm)
			for i := range u {
				u[i] /= norm
			}
			return u
		}
	}
}

// project removes x's component along the unit vector u.
func project(x, u []float64) {
	p := dot(x, u)
	for i := range x {
		x[i] -= p * u[i]
	}
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
