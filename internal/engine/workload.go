package engine

import (
	"fmt"

	"cacheon/internal/arena"
	"cacheon/internal/splitmix"
)

// Wave kinds: warm-up waves are run but not scored; timed waves are scored.
// Each kind has its own request stream, so the number of warm-up waves never
// changes what the timed waves ask for.
const (
	streamWarmup uint64 = 0x5741524d // "WARM"
	streamTimed  uint64 = 0x54494d45 // "TIME"
)

// Wave is one wave of requests with their arrival steps.
type Wave struct {
	Requests []Request
	// Arrivals[i] is the number of decode steps after which request i
	// joins (nil when every request arrives at once).
	Arrivals []int
}

// PromptTokens is the number of prompt tokens in the wave.
func (w Wave) PromptTokens() int {
	n := 0
	for _, r := range w.Requests {
		n += len(r.Prompt)
	}
	return n
}

// PrefillOnly is the same wave with max_new_tokens = 1 and every request at
// once: timing it next to the full wave splits prefill from decode.
func (w Wave) PrefillOnly() Wave {
	out := Wave{Requests: make([]Request, len(w.Requests))}
	for i, r := range w.Requests {
		r.RID += "-p"
		r.MaxNewTokens = 1
		out.Requests[i] = r
	}
	return out
}

// Requests generates wave index of a workload (timed waves when warmup is
// false), deterministically from the workload seed: prompt and output
// lengths uniform in their inclusive ranges, prompt tokens uniform in the
// token range, ignore_eos on every request.
func Requests(w arena.Workload, index int, warmup bool) (Wave, error) {
	if w.Requests < 1 || w.PromptLen[0] < 1 || w.PromptLen[0] > w.PromptLen[1] || w.OutputLen[0] < 1 ||
		w.OutputLen[0] > w.OutputLen[1] || w.TokenRange[0] < 0 || w.TokenRange[0] >= w.TokenRange[1] {
		return Wave{}, fmt.Errorf("workload: invalid %+v", w)
	}
	stream, tag := streamTimed, "w"
	if warmup {
		stream, tag = streamWarmup, "warm"
	}
	// SplitMix64 is fixed and documented, so request streams never depend
	// on the Go version; IntnUnbiased has no modulo bias.
	g := splitmix.Mixed(uint64(w.Seed), stream, uint64(index))
	wave := Wave{Requests: make([]Request, w.Requests)}
	for i := range wave.Requests {
		pl := w.PromptLen[0] + g.IntnUnbiased(w.PromptLen[1]-w.PromptLen[0]+1)
		ol := w.OutputLen[0] + g.IntnUnbiased(w.OutputLen[1]-w.OutputLen[0]+1)
		prompt := make([]int, pl)
		for j := range prompt {
			prompt[j] = w.TokenRange[0] + g.IntnUnbiased(w.TokenRange[1]-w.TokenRange[0])
		}
		wave.Requests[i] = Request{RID: fmt.Sprintf("%s%d-r%d", tag, index, i), Prompt: prompt, MaxNewTokens: ol, IgnoreEOS: true}
	}
	if w.ArrivalEvery > 0 {
		wave.Arrivals = make([]int, w.Requests)
		for i := range wave.Arrivals {
			wave.Arrivals[i] = i * w.ArrivalEvery
		}
	}
	return wave, nil
}
