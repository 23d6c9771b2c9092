package served

import (
	"fmt"
	"slices"
	"strings"

	"cacheon/internal/arena"
	"cacheon/internal/engine"
	"cacheon/internal/splitmix"
)

// plan is what the stage serves on one engine and how much of it is
// dumped.
type plan struct {
	// arena is the arena the engine loads: the shipped one with the first
	// wave as its workload.
	arena *arena.Arena
	// waves run in order on the same engine.
	waves    []engine.Wave
	share    string
	maxDumps int
}

// The bounds of a stage on a GPU arena, where the models are large and
// every dump is regraded by Go on the host's cores.
const (
	// gpuPromptCap bounds one request's prompt: a packed attention call of
	// that many tokens is a few tens of GFLOP for Go's reference.
	gpuPromptCap = 2048
	// gpuExpertFlops bounds Go's reference of one MoE call (both its GEMMs
	// and the sensitivity GEMM of squares): the prompt tokens of a wave
	// are capped so that a prefill call stays within it.
	gpuExpertFlops = 2e11
	// gpuDumpBytes bounds the dumps of a stage whose dumps carry the
	// experts' weights (every MoE dump does).
	gpuDumpBytes = 12 << 30
	// gpuMaxDumps bounds the dumps of any other slot on a GPU.
	gpuMaxDumps = 64
)

// newPlan is the stage's workload on a: two waves drawn from seed, then
// the arena's own workload, served one after the other by one engine.
//
// The first wave packs up to eight requests arriving at once, so that
// prefill hands the kernel one batch of several prompts (attention gets
// consecutive segments of it, and the batch has more rows than the model
// is wide, so a GEMM's output has more rows than its rank): prompts from
// the arena's shortest up to a length that makes the packed batch about
// one and a half hidden widths on average, 8 to 24 new tokens each.
//
// The second wave staggers up to eight requests: each joins a few decode
// steps after the one before (a drawn gap of 3 to 8), so that prefill
// calls come after many small decode calls and the decode batch grows
// while it runs; one request, at a drawn place, has a long prompt (half
// to all of what the positions, the KV pages and the device's cap allow),
// so that decode reads a cache far longer than any verify row's; one, at
// a drawn place, starts with the first wave's first prompt (as much of it
// as fits), as a shared system prompt or a prompt sent again does; 16 to 40
// new tokens each.
//
// The third wave is the first timed wave of the arena's own workload, with
// its own seed, exactly as the referee serves it (and uncapped: a shipped
// workload's prompts are the arena's own).
//
// Prompt tokens are drawn over a window of 256 token ids at a drawn
// offset, so that prompts repeat tokens as text does. On a GPU every
// prompt is capped (gpuPromptCap, and for the MoE slots by what Go's
// reference of a call may cost), and the audit dumps a seeded share of
// the candidate's calls spread over the waves; on the CPU it dumps them
// all.
func newPlan(a *arena.Arena, slots []string, seed uint64) (*plan, error) {
	w := a.Work
	if w.Requests < 1 || w.TokenRange[1] <= w.TokenRange[0] || w.PromptLen[0] < 1 {
		return nil, fmt.Errorf("served: arena %s: the workload is empty", a.Name)
	}
	g := splitmix.Mixed(seed, 0x5e7fed)
	m, e := a.Model, a.Engine
	kvTokens := (e.KVPages - 1) * e.PageSize
	perRequest, perWave := promptCaps(a, slots)

	// The first wave: packed.
	w.Requests = min(8, max(1, e.MaxBatch))
	w.OutputLen = [2]int{8, 24}
	longest := max(w.PromptLen[1], 2*(m.HiddenSize*3/2+8)/w.Requests)
	longest = min(longest, m.MaxPosition-w.OutputLen[1], kvTokens/w.Requests-w.OutputLen[1]-e.PageSize, perRequest, perWave/w.Requests)
	if longest < 1 {
		return nil, fmt.Errorf("served: arena %s: %d requests of %d new tokens do not fit its positions and KV pages",
			a.Name, w.Requests, w.OutputLen[1])
	}
	w.PromptLen = [2]int{min(w.PromptLen[0], longest), longest}
	w.Waves, w.Warmup, w.ArrivalEvery = 1, 0, 0
	w.Seed = int64(g.Uint64() >> 1)
	if span := w.TokenRange[1] - w.TokenRange[0]; span > 256 {
		lo := w.TokenRange[0] + g.IntnUnbiased(span-256+1)
		w.TokenRange = [2]int{lo, lo + 256}
	}
	packed, err := engine.Requests(w, 0, false)
	if err != nil {
		return nil, fmt.Errorf("served: arena %s: %w", a.Name, err)
	}

	// The second wave: staggered, one long prompt.
	n := min(8, max(1, e.MaxBatch))
	const outLo, outHi = 16, 40
	short := [2]int{w.PromptLen[0], max(w.PromptLen[0], min(a.Work.PromptLen[1], w.PromptLen[1]))}
	reserve := outHi + e.PageSize // a request's new tokens and its last page's slack
	longCap := min(m.MaxPosition-outHi, kvTokens-(n-1)*(short[0]+reserve)-reserve, perRequest, perWave)
	if longCap < short[0] {
		return nil, fmt.Errorf("served: arena %s: a staggered wave of %d requests does not fit its positions and KV pages", a.Name, n)
	}
	// The long prompt first, the others within the pages it leaves.
	longLen := max(short[0], longCap/2) + g.IntnUnbiased(longCap-max(short[0], longCap/2)+1)
	short[1] = max(short[0], min(short[1], (kvTokens-longLen-reserve)/max(1, n-1)-reserve))
	long := g.IntnUnbiased(n)
	// One request (at a drawn place) starts with the prompt the first
	// wave's packed batch starts with, as a shared system prompt or a
	// prompt sent again does: its prefill's first rows are the packed
	// prefill's.
	repeat, src := g.IntnUnbiased(n), packed.Requests[0].Prompt
	staggered := engine.Wave{Arrivals: make([]int, n)}
	for i := range n {
		size := longLen
		if i != long {
			size = short[0] + g.IntnUnbiased(short[1]-short[0]+1)
		}
		prompt := make([]int, size)
		from := 0
		if i == repeat {
			from = copy(prompt, src)
		}
		for j := from; j < size; j++ {
			prompt[j] = w.TokenRange[0] + g.IntnUnbiased(w.TokenRange[1]-w.TokenRange[0])
		}
		staggered.Requests = append(staggered.Requests, engine.Request{
			RID: fmt.Sprintf("served1-r%d", i), Prompt: prompt, MaxNewTokens: outLo + g.IntnUnbiased(outHi-outLo+1), IgnoreEOS: true,
		})
		if i > 0 {
			staggered.Arrivals[i] = staggered.Arrivals[i-1] + 3 + g.IntnUnbiased(6)
		}
	}
	// The third wave: the arena's own workload as the referee serves it
	// (its first wave, its own seed): a kernel that waits for the
	// pattern the referee times (its arrivals, its batch, its prompts)
	// meets it here.
	own, err := engine.Requests(a.Work, 0, false)
	if err != nil {
		return nil, fmt.Errorf("served: arena %s: its workload: %w", a.Name, err)
	}
	for i := range own.Requests {
		own.Requests[i].RID = fmt.Sprintf("served2-r%d", i)
	}
	sa := servedArena(a, max(w.Requests, n, len(own.Requests)))
	sa.Work = w
	p := &plan{arena: sa, waves: []engine.Wave{packed, staggered, own}, share: "1", maxDumps: 4096}
	if a.Device != "cpu" {
		p.maxDumps = gpuMaxDumps
		if b := expertBytes(a, slots); b > 0 {
			p.maxDumps = min(gpuMaxDumps, max(2, gpuDumpBytes/b))
		}
		// Spread the dumps over the waves, late calls as likely as
		// early ones: a share that makes about three quarters of
		// maxDumps draws over the calls the waves make (so that the
		// bound rarely cuts the last calls off), at most one in eight.
		calls := 0
		for _, name := range slots {
			calls += slotCalls(a, name, p.waves)
		}
		p.share = shareString(min(0.125, 0.75*float64(p.maxDumps)/float64(max(1, calls))))
	}
	return p, nil
}

// servedArena is a copy of a for the stage, whose waves run at most
// `most` requests at once: its engine captures the decode graphs up to the
// smallest bucket that holds them (a larger one is never replayed, and
// its capture would be load time alone). The shipped workload is kept;
// newPlan replaces it with the first wave.
func servedArena(a *arena.Arena, most int) *arena.Arena {
	sa := *a
	var buckets []int
	for _, b := range slices.Sorted(slices.Values(a.Engine.GraphBuckets)) {
		buckets = append(buckets, b)
		if b >= most {
			break
		}
	}
	sa.Engine.GraphBuckets = buckets
	return &sa
}

// promptCaps are the device's bounds on one request's prompt and on a
// wave's packed prompt tokens (large on the CPU, whose arenas are tiny).
func promptCaps(a *arena.Arena, slots []string) (perRequest, perWave int) {
	const none = 1 << 30
	if a.Device == "cpu" {
		return none, none
	}
	perWave = none
	if slices.ContainsFunc(slots, isExperts) {
		m := a.Model
		perToken := 2 * 2 * float64(max(1, m.TopK)) * 3 * float64(m.HiddenSize) * float64(m.IntermediateSize)
		perWave = max(8, int(gpuExpertFlops/perToken))
	}
	return gpuPromptCap, perWave
}

// isExperts reports whether the slot's calls carry the experts' weights.
func isExperts(slotName string) bool {
	return strings.HasPrefix(slotName, "moe.") || slotName == "collective.moe_finalize_ar_rmsnorm"
}

// expertBytes is the size of the experts' weights a dump of one of the
// slots carries on a (0 when none is a MoE slot).
func expertBytes(a *arena.Arena, slots []string) int {
	if !slices.ContainsFunc(slots, isExperts) || a.Model.NumExperts == 0 {
		return 0
	}
	m := a.Model
	size := 2
	if a.DType == "float32" {
		size = 4
	}
	return m.NumExperts * 3 * m.HiddenSize * m.IntermediateSize * size / a.Engine.Ranks()
}

// slotCalls is about how many calls of the slot the waves make: per
// forward (one prefill per request at most, and every decode step), one
// per layer, two and the final one for the norm; the attention slots of
// one phase (decode, or prefill) in that phase's forwards alone.
func slotCalls(a *arena.Arena, slotName string, waves []engine.Wave) int {
	prefills := 0
	for _, w := range waves {
		prefills += len(w.Requests)
	}
	decodes, layers := steps(waves), a.Model.NumLayers
	switch slotName {
	case "norm.rmsnorm":
		return (2*layers + 1) * (prefills + decodes)
	case "attention.decode", "attention.msa_block_score":
		return layers * decodes
	case "attention.sdpa", "attention.msa_prefill_block_score":
		return layers * prefills
	}
	return layers * (prefills + decodes)
}

// steps bounds the engine steps of the waves: each request's arrival and
// new tokens, and a prefill step.
func steps(waves []engine.Wave) int {
	n := 0
	for _, w := range waves {
		last := 0
		for i, r := range w.Requests {
			at := 0
			if w.Arrivals != nil {
				at = w.Arrivals[i]
			}
			last = max(last, at+r.MaxNewTokens+1)
		}
		n += last
	}
	return n
}

// shareString is a share in [0, 1] as the audit's canonical decimal.
func shareString(x float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", x), "0"), ".")
}
