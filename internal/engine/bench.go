package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/canon"
	"cacheon/internal/worker"
)

// TokensDomain is the canon domain of a wave's generated tokens (one list
// per request, in request order).
const TokensDomain = "cacheon.engine_tokens"

// BenchOptions tune a bench run.
type BenchOptions struct {
	Waves       int           // timed waves (0 = the arena's)
	Warmup      int           // warm-up waves (0 = the arena's, negative = none)
	WaveTimeout time.Duration // bound on one generate request (default 10 minutes)
	// Progress receives one short line per step; may be nil.
	Progress func(line string)
	// AuditPositions, when set, is asked once after the warm-up, with the
	// slot counters read then, for the selected calls of each slot to dump
	// (numbers counted from the load, as the counters count them); they are
	// sent to the runtime (Engine.AuditCalls) before the first timed wave.
	AuditPositions func(before map[string]SlotCounters) (map[string][]int, error)
}

// WaveResult is one timed wave. Every time is the host's.
type WaveResult struct {
	Index        int     `json:"index"`
	Requests     int     `json:"requests"`
	PromptTokens int     `json:"prompt_tokens"`
	Generated    int     `json:"generated_tokens"`
	Seconds      float64 `json:"seconds"`
	TokensPerSec float64 `json:"tokens_per_s"`
	// PrefillSeconds is the host time of the same requests with
	// max_new_tokens = 1; PrefillTokensPerSec is prompt tokens over it.
	PrefillSeconds      float64 `json:"prefill_seconds"`
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_s"`
	// DecodeSeconds is Seconds - PrefillSeconds (clamped at 0);
	// DecodeTokensPerSec is the tokens after the first of each request
	// over it (0 when there is no decode time left).
	DecodeSeconds      float64 `json:"decode_seconds"`
	DecodeTokensPerSec float64 `json:"decode_tokens_per_s"`
	// DecodeWithinNoise marks a wave that generated past the first token
	// of its requests yet whose prefill-only wave took as long as the
	// whole wave: its decode time is lost in timing noise, not zero, and
	// it is left out of the median decode rate.
	DecodeWithinNoise bool `json:"decode_within_noise,omitempty"`
	// Steps are the runtime's step counts (untrusted).
	Steps        Steps  `json:"runtime_steps"`
	TokensDigest string `json:"tokens_digest"`

	// Results are the wave's tokens and logprobs.
	Results []Result `json:"-"`
	// Wall is the host time of the full wave, exactly as measured (Seconds
	// is its rounding to a float).
	Wall time.Duration `json:"-"`
}

// Summary is the median over timed waves of each rate.
type Summary struct {
	TokensPerSec        float64 `json:"tokens_per_s"`
	PrefillTokensPerSec float64 `json:"prefill_tokens_per_s"`
	DecodeTokensPerSec  float64 `json:"decode_tokens_per_s"`
	Seconds             float64 `json:"seconds"`
}

// Spread is the range of the timed waves' generated tokens per second, to
// read beside the median: how far the waves of one read are apart.
type Spread struct {
	MinTokensPerSec float64 `json:"min_tokens_per_s"`
	MaxTokensPerSec float64 `json:"max_tokens_per_s"`
}

// BenchResult is a whole read: the scored rate is Median.TokensPerSec.
type BenchResult struct {
	Warmup int          `json:"warmup_waves"`
	Waves  []WaveResult `json:"waves"`
	Median Summary      `json:"median"`
	Spread Spread       `json:"spread"`
	// TokensDigest identifies every timed wave's tokens together: the same
	// arena, stack and seed must give the same digest.
	TokensDigest string                  `json:"tokens_digest"`
	Slots        map[string]SlotCounters `json:"slots"`
	Receipts     []Receipt               `json:"receipts"`
	// RuntimeProfile is the runtime's self-reported time split (when
	// loaded with Profile): untrusted, diagnostic only.
	RuntimeProfile json.RawMessage `json:"runtime_profile_untrusted,omitempty"`
	// TimedSlots are the slot counters of the timed waves alone (the
	// prefill-only and full waves after warm-up): Slots less the counters
	// read before the first timed wave.
	TimedSlots map[string]SlotCounters `json:"-"`
}

// Bench drives the arena's workload on a loaded engine: warm-up waves, then
// for each timed wave a prefill-only wave and the full wave, each timed on
// the host around its generate request; then the slot counters.
func Bench(ctx context.Context, e *Engine, a *arena.Arena, o BenchOptions) (*BenchResult, error) {
	w := a.Work
	waves, warm := w.Waves, w.Warmup
	if o.Waves > 0 {
		waves = o.Waves
	}
	if o.Warmup != 0 {
		warm = max(0, o.Warmup)
	}
	if o.WaveTimeout <= 0 {
		o.WaveTimeout = 10 * time.Minute
	}
	say := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf(format, args...))
		}
	}
	res := &BenchResult{Warmup: warm}
	vocab := a.Model.VocabSize
	for i := 0; i < warm; i++ {
		say("warm-up %d/%d", i+1, warm)
		wave, err := Requests(w, i, true)
		if err != nil {
			return nil, err
		}
		if _, err := runWave(ctx, e, wave, vocab, o.WaveTimeout, fmt.Sprintf("warm-up wave %d", i+1)); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	before, err := e.Stats(sctx)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if o.AuditPositions != nil {
		calls, err := o.AuditPositions(before.Slots)
		if err != nil {
			return nil, fmt.Errorf("bench: audit positions: %w", err)
		}
		if err := e.AuditCalls(sctx, calls); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	var digests []string
	for i := 0; i < waves; i++ {
		say("wave %d/%d", i+1, waves)
		wave, err := Requests(w, i, false)
		if err != nil {
			return nil, err
		}
		wr, err := runWave(ctx, e, wave, vocab, o.WaveTimeout, fmt.Sprintf("wave %d", i+1))
		if err != nil {
			return nil, err
		}
		wr.Index = i
		res.Waves = append(res.Waves, *wr)
		digests = append(digests, wr.TokensDigest)
		say("wave %d/%d: %d tokens in %.3fs (%.1f tok/s)", i+1, waves, wr.Generated, wr.Seconds, wr.TokensPerSec)
	}
	res.Median, res.Spread = summarize(res.Waves), spread(res.Waves)
	if res.TokensDigest, err = canon.Digest(TokensDomain, 1, digests); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	actx, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	st, err := e.Stats(actx)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	res.Slots, res.Receipts, res.RuntimeProfile = st.Slots, st.Receipts, st.Profile
	res.TimedSlots = make(map[string]SlotCounters, len(st.Slots))
	for name, c := range st.Slots {
		res.TimedSlots[name] = c.Since(before.Slots[name])
	}
	return res, nil
}

// runWave times the prefill-only wave and then the full wave.
func runWave(ctx context.Context, e *Engine, wave Wave, vocab int, timeout time.Duration, label string) (*WaveResult, error) {
	gen := func(w Wave, what string) (*Generated, error) {
		gctx, cancel := worker.WithLimit(ctx, timeout, "--timeout")
		defer cancel()
		g, err := e.Generate(gctx, w.Requests, w.Arrivals, vocab)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", label, what, err)
		}
		return g, nil
	}
	pre, err := gen(wave.PrefillOnly(), "prefill only")
	if err != nil {
		return nil, err
	}
	full, err := gen(wave, "full")
	if err != nil {
		return nil, err
	}
	wr := &WaveResult{Requests: len(wave.Requests), PromptTokens: wave.PromptTokens(), Steps: full.Steps,
		Results: full.Results}
	tokens := make([][]int, len(full.Results))
	for i, r := range full.Results {
		wr.Generated += len(r.Tokens)
		tokens[i] = r.Tokens
	}
	if wr.TokensDigest, err = canon.Digest(TokensDomain, 1, tokens); err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	wr.split(full.Wall, pre.Wall)
	return wr, nil
}

// split fills in the rates from the wall times of the full wave and of the
// prefill-only wave (Requests, PromptTokens and Generated already set).
func (wr *WaveResult) split(full, prefill time.Duration) {
	wr.Wall = full
	wr.Seconds = full.Seconds()
	wr.PrefillSeconds = prefill.Seconds()
	wr.TokensPerSec = rate(wr.Generated, wr.Seconds)
	wr.PrefillTokensPerSec = rate(wr.PromptTokens, wr.PrefillSeconds)
	wr.DecodeSeconds = max(0, wr.Seconds-wr.PrefillSeconds)
	wr.DecodeTokensPerSec = rate(wr.Generated-wr.Requests, wr.DecodeSeconds)
	wr.DecodeWithinNoise = wr.DecodeSeconds <= 0 && wr.Generated > wr.Requests
}

func rate(n int, seconds float64) float64 {
	if seconds <= 0 || n <= 0 {
		return 0
	}
	return float64(n) / seconds
}

func summarize(ws []WaveResult) Summary {
	pick := func(f func(WaveResult) float64) float64 {
		v := make([]float64, len(ws))
		for i, w := range ws {
			v[i] = f(w)
		}
		return Median(v)
	}
	// A wave whose decode time is lost in the noise has no decode rate;
	// it is left out of that median rather than counted as zero.
	var decode []float64
	for _, w := range ws {
		if !w.DecodeWithinNoise {
			decode = append(decode, w.DecodeTokensPerSec)
		}
	}
	return Summary{
		TokensPerSec:        pick(func(w WaveResult) float64 { return w.TokensPerSec }),
		PrefillTokensPerSec: pick(func(w WaveResult) float64 { return w.PrefillTokensPerSec }),
		DecodeTokensPerSec:  Median(decode),
		Seconds:             pick(func(w WaveResult) float64 { return w.Seconds }),
	}
}

// spread is the min and max tokens per second over the timed waves.
func spread(ws []WaveResult) Spread {
	var s Spread
	for i, w := range ws {
		if i == 0 || w.TokensPerSec < s.MinTokensPerSec {
			s.MinTokensPerSec = w.TokensPerSec
		}
		if i == 0 || w.TokensPerSec > s.MaxTokensPerSec {
			s.MaxTokensPerSec = w.TokensPerSec
		}
	}
	return s
}

// Median is the middle value (the mean of the two middle values for an
// even count; 0 for none).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
