package engine

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"cacheon/internal/arena"
)

// replyHead is what every successful reply carries besides its body.
type replyHead struct {
	ID string `json:"id"`
	OK bool   `json:"ok"`
}

// Hello is the runtime's description of itself (diagnostics only).
type Hello struct {
	Python     string  `json:"python"`
	Torch      string  `json:"torch"`
	CUDA       bool    `json:"cuda"`
	DeviceName string  `json:"device_name"`
	Triton     *string `json:"triton"`
	PID        int     `json:"pid"`
	// AuditHook: the runtime's PEP 578 audit hook is installed
	// (worker.AuditHookLayer).
	AuditHook bool `json:"audit_hook"`
	// DeviceCount is the number of CUDA devices the runtime sees (0
	// without CUDA).
	DeviceCount int `json:"device_count"`
}

// SlotEntry is one candidate slot of an engine stack as the runtime loads
// it. Slots absent from the stack use stock.
type SlotEntry struct {
	Bundle  string `json:"bundle"` // absolute bundle root
	Source  string `json:"source"`
	Entry   string `json:"entry"`
	Prepare string `json:"prepare"`
	Variant string `json:"variant"`
	// Domain is the row's canonical capability domain
	// (capability.Domain.Canonical()).
	Domain any `json:"domain"`
}

// Audit configures sampled audit dumps; the zero value disables audit.
type Audit struct {
	Every    int    `json:"every"` // every Nth selected call (0 = none)
	Share    string `json:"share"` // seeded random share, canonical decimal in [0, 1]
	Seed     int64  `json:"seed"`
	Dir      string `json:"dir"` // absolute
	MaxDumps int    `json:"max_dumps"`
	// Graph dumps calls replayed from CUDA graphs too, through copies
	// captured beside each candidate call (the runtime's auditsites); an
	// engine loaded with graphs (GraphsOn) only.
	Graph bool `json:"graph,omitempty"`
}

// LoadRequest builds the engine.
type LoadRequest struct {
	Arena      arena.RuntimeConfig
	Checkpoint string // absolute, or ""
	Stack      map[string]SlotEntry
	Graphs     bool
	Strict     bool
	Audit      Audit
	// Profile asks the runtime to time its own regions (attention, MLP,
	// norm, sampling, each slot) for diagnostics. It turns CUDA graphs off
	// and nothing is graded on it.
	Profile bool
	// Poison names slots whose stock calls get outputs as a candidate's do
	// (fresh, aligned, poisoned before every call): the referee names its
	// target in every engine of an attempt, so that the incumbent's and the
	// candidate's calls of it differ in the kernel alone.
	Poison []string
}

// Loaded is the runtime's reply to load.
type Loaded struct {
	Params       int64  `json:"params"`
	Layers       int    `json:"layers"`
	Device       string `json:"device"`
	DType        string `json:"dtype"`
	KVPages      int    `json:"kv_pages"`
	GraphBuckets []int  `json:"graph_buckets"`
	// PrefillGraphTokens are the token buckets of the single-prompt
	// prefill graphs (dense models on CUDA).
	PrefillGraphTokens []int `json:"prefill_graph_tokens"`
	// Rank and WorldSize say which rank of a tensor-parallel engine
	// replied (rank 0 of 1 for a single process).
	Rank      int `json:"rank"`
	WorldSize int `json:"world_size"`
}

// Load builds the model and the engine stack (every rank the same).
func (e *Engine) Load(ctx context.Context, req LoadRequest) (*Loaded, error) {
	var r struct {
		replyHead
		Loaded
	}
	if err := e.call(ctx, "load", loadMessage(req), &r); err != nil {
		return nil, err
	}
	if r.Rank != 0 || r.WorldSize != e.WorldSize() {
		return nil, fmt.Errorf("load: rank 0 replied as rank %d of %d, the engine has %d ranks", r.Rank, r.WorldSize, e.WorldSize())
	}
	return checkLoaded(&r.Loaded, req)
}

// loadMessage is the load request's message.
func loadMessage(req LoadRequest) map[string]any {
	stack := req.Stack
	if stack == nil {
		stack = map[string]SlotEntry{}
	}
	audit := req.Audit
	if audit.Share == "" {
		audit.Share = "0"
	}
	poison := req.Poison
	if poison == nil {
		poison = []string{}
	}
	return map[string]any{
		"op": "load", "arena": req.Arena, "checkpoint": req.Checkpoint, "stack": stack,
		"graphs": req.Graphs, "strict": req.Strict, "audit": audit, "profile": req.Profile, "poison": poison,
	}
}

// checkLoaded checks rank 0's load reply against the request.
func checkLoaded(l *Loaded, req LoadRequest) (*Loaded, error) {
	if l.Layers != req.Arena.Model.NumLayers || l.DType != req.Arena.DType {
		return nil, fmt.Errorf("load: the runtime built %d layers of %s, the arena has %d of %s", l.Layers, l.DType, req.Arena.Model.NumLayers, req.Arena.DType)
	}
	return l, nil
}

// Request is one generation request.
type Request struct {
	RID          string `json:"rid"`
	Prompt       []int  `json:"prompt"`
	MaxNewTokens int    `json:"max_new_tokens"`
	IgnoreEOS    bool   `json:"ignore_eos"`
}

// Result is one request's generated tokens and their logprobs. On the
// wire the runtime sends them as tokens_i32 and logprobs_f32 (see
// UnmarshalJSON); Result marshals them as plain numbers.
type Result struct {
	RID      string    `json:"rid"`
	Tokens   []int     `json:"tokens"`
	Logprobs []float64 `json:"logprobs"`
}

// UnmarshalJSON reads a result line of the protocol: rid, tokens_i32 (the
// tokens as base64 of little-endian int32 values) and logprobs_f32 (the
// logprobs as base64 of little-endian float32 values); see
// docs/engine-protocol.md.
func (r *Result) UnmarshalJSON(b []byte) error {
	var w struct {
		RID         string  `json:"rid"`
		TokensI32   *string `json:"tokens_i32"`
		LogprobsF32 *string `json:"logprobs_f32"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.TokensI32 == nil {
		return fmt.Errorf("result %q has no tokens_i32", w.RID)
	}
	if w.LogprobsF32 == nil {
		return fmt.Errorf("result %q has no logprobs_f32", w.RID)
	}
	toks, err := DecodeI32(*w.TokensI32)
	if err != nil {
		return fmt.Errorf("result %q: tokens_i32: %w", w.RID, err)
	}
	lps, err := DecodeF32(*w.LogprobsF32)
	if err != nil {
		return fmt.Errorf("result %q: logprobs_f32: %w", w.RID, err)
	}
	*r = Result{RID: w.RID, Tokens: toks, Logprobs: lps}
	return nil
}

// DecodeF32 decodes base64 (standard alphabet, padded) of little-endian
// IEEE float32 values into float64s (exact).
func DecodeF32(s string) ([]float64, error) {
	raw, err := decodeWords(s, "float32")
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(raw)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	return out, nil
}

// DecodeI32 decodes base64 (standard alphabet, padded) of little-endian
// two's-complement int32 values into ints.
func DecodeI32(s string) ([]int, error) {
	raw, err := decodeWords(s, "int32")
	if err != nil {
		return nil, err
	}
	out := make([]int, len(raw)/4)
	for i := range out {
		out[i] = int(int32(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	return out, nil
}

// decodeWords decodes base64 that must hold whole 4-byte values.
func decodeWords(s, what string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	if len(raw)%4 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of %s values", len(raw), what)
	}
	return raw, nil
}

// Steps are the runtime's (untrusted) step counts for one generate.
type Steps struct {
	Prefill int `json:"prefill"`
	Decode  int `json:"decode"`
}

// Generated is the runtime's reply to generate, plus the host-measured wall
// time of the request.
type Generated struct {
	Results []Result `json:"results"`
	Steps   Steps    `json:"steps"`

	// Wall is the host's monotonic time from sending the request to
	// having read the whole reply (before decoding it).
	Wall time.Duration `json:"-"`
}

// Generate runs a wave of requests; arrivals (nil, or one per request) are
// the decode steps after which request i joins. The wall time is measured
// here, around the request. Replies are checked against the requests:
// every rid once and in order, at most max_new_tokens tokens (exactly that
// many with ignore_eos), tokens in [0, vocab), finite logprobs <= 0.
func (e *Engine) Generate(ctx context.Context, reqs []Request, arrivals []int, vocab int) (*Generated, error) {
	if arrivals != nil && len(arrivals) != len(reqs) {
		return nil, fmt.Errorf("generate: %d arrivals for %d requests", len(arrivals), len(reqs))
	}
	msg := map[string]any{"op": "generate", "requests": reqs}
	if arrivals != nil {
		msg["arrivals"] = arrivals
	}
	type reply struct {
		replyHead
		Generated
	}
	start := time.Now()
	rs, at, err := roundTripAt(e, ctx, "generate", func(int) map[string]any { return msg }, func() *reply { return new(reply) })
	if err != nil {
		return nil, err
	}
	g := rs[0].Generated
	// The wave ends when its reply has arrived in full from every rank;
	// decoding and checking it is the validator's own work.
	g.Wall = at.Sub(start)
	// Every rank samples from the same reduced hidden states: ranks that
	// disagree on a token ran different arithmetic (a collective that did
	// not give every rank the same sum).
	for r := 1; r < len(rs); r++ {
		if err := sameTokens(g.Results, rs[r].Results); err != nil {
			return nil, &RankMismatchError{Step: "generate", Rank: r, Detail: err.Error() + " (every rank samples from the same reduced hidden states)"}
		}
	}
	if err := checkResults(reqs, g.Results, vocab); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	if g.Steps.Prefill < 0 || g.Steps.Decode < 0 {
		return nil, fmt.Errorf("generate: negative step counts %+v", g.Steps)
	}
	return &g, nil
}

func checkResults(reqs []Request, res []Result, vocab int) error {
	if len(res) != len(reqs) {
		return fmt.Errorf("%d results for %d requests", len(res), len(reqs))
	}
	for i, r := range res {
		q := reqs[i]
		if r.RID != q.RID {
			return fmt.Errorf("result %d is for %q, want %q (results come in request order)", i, r.RID, q.RID)
		}
		if len(r.Tokens) > q.MaxNewTokens || (q.IgnoreEOS && len(r.Tokens) != q.MaxNewTokens) || len(r.Tokens) == 0 {
			return fmt.Errorf("request %s: %d tokens for max_new_tokens %d (ignore_eos %t)", q.RID, len(r.Tokens), q.MaxNewTokens, q.IgnoreEOS)
		}
		if len(r.Logprobs) != len(r.Tokens) {
			return fmt.Errorf("request %s: %d logprobs for %d tokens", q.RID, len(r.Logprobs), len(r.Tokens))
		}
		for j, t := range r.Tokens {
			if t < 0 || t >= vocab {
				return fmt.Errorf("request %s: token %d = %d is outside the vocabulary [0, %d)", q.RID, j, t, vocab)
			}
			if lp := r.Logprobs[j]; math.IsNaN(lp) || math.IsInf(lp, 0) || lp > 1e-6 {
				return fmt.Errorf("request %s: logprob %d = %v is not a finite log-probability", q.RID, j, lp)
			}
		}
	}
	return nil
}

// Score returns the teacher-forced NLL of every token of sequences[i] from
// position from[i] on (len(sequences[i]) - from[i] values each).
func (e *Engine) Score(ctx context.Context, sequences [][]int, from []int) ([][]float64, error) {
	if len(from) != len(sequences) {
		return nil, fmt.Errorf("score: %d start positions for %d sequences", len(from), len(sequences))
	}
	for i, k := range from {
		if k < 1 || k >= len(sequences[i]) {
			return nil, fmt.Errorf("score: sequence %d: from %d is not in [1, %d)", i, k, len(sequences[i]))
		}
	}
	var r struct {
		replyHead
		NLL [][]float64 `json:"nll"`
	}
	if err := e.call(ctx, "score", map[string]any{"op": "score", "sequences": sequences, "from": from}, &r); err != nil {
		return nil, err
	}
	if len(r.NLL) != len(sequences) {
		return nil, fmt.Errorf("score: %d results for %d sequences", len(r.NLL), len(sequences))
	}
	for i, v := range r.NLL {
		if want := len(sequences[i]) - from[i]; len(v) != want {
			return nil, fmt.Errorf("score: sequence %d: %d values, want %d", i, len(v), want)
		}
		if j := slices.IndexFunc(v, func(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x < -1e-6 }); j >= 0 {
			return nil, fmt.Errorf("score: sequence %d: nll %d = %v is not a finite non-negative value", i, j, v[j])
		}
	}
	return r.NLL, nil
}

// SlotCounters are one slot's dispatch counters as the runtime reports them.
type SlotCounters struct {
	Selected   int64 `json:"selected"`
	Completed  int64 `json:"completed"`
	Fallback   int64 `json:"fallback"`
	Ineligible int64 `json:"ineligible"`
	Audited    int64 `json:"audited"`
	Stock      int64 `json:"stock"`
}

// Since is the counters accumulated after before was read.
func (c SlotCounters) Since(before SlotCounters) SlotCounters {
	return SlotCounters{Selected: c.Selected - before.Selected, Completed: c.Completed - before.Completed,
		Fallback: c.Fallback - before.Fallback, Ineligible: c.Ineligible - before.Ineligible,
		Audited: c.Audited - before.Audited, Stock: c.Stock - before.Stock}
}

// Fired is the number of calls the slot served (candidate or stock).
func (c SlotCounters) Fired() int64 { return c.Selected + c.Stock + c.Ineligible }

// Receipt is a fallback receipt (non-strict mode).
type Receipt struct {
	Slot    string `json:"slot"`
	Variant string `json:"variant"`
	Reason  string `json:"reason"`
	Count   int64  `json:"count"`
}

// AuditCalls tells every rank which selected calls of each slot to dump
// from now on (their numbers counted from the load, as SlotCounters.Selected
// counts them); the engine must have been loaded with audit on (a
// directory). The runtime dumps them besides any share or every rule.
func (e *Engine) AuditCalls(ctx context.Context, calls map[string][]int) error {
	if calls == nil {
		calls = map[string][]int{}
	}
	var r struct {
		replyHead
		Calls int `json:"calls"`
	}
	if err := e.call(ctx, "audit_calls", map[string]any{"op": "audit_calls", "calls": calls}, &r); err != nil {
		return err
	}
	want := 0
	for _, c := range calls {
		want += len(slices.Compact(slices.Sorted(slices.Values(c))))
	}
	if r.Calls != want {
		return fmt.Errorf("audit_calls: the runtime took %d positions, %d were sent", r.Calls, want)
	}
	return nil
}

// Stats is the runtime's reply to stats.
type Stats struct {
	Slots    map[string]SlotCounters `json:"slots"`
	Receipts []Receipt               `json:"receipts"`
	// Profile is the runtime's self-reported per-step time split (only
	// when loaded with Profile): untrusted, diagnostic only.
	Profile json.RawMessage `json:"profile,omitempty"`
}

// Stats reads the slot counters and receipts.
func (e *Engine) Stats(ctx context.Context) (*Stats, error) {
	type reply struct {
		replyHead
		Stats
	}
	rs, err := roundTrip(e, ctx, "stats", map[string]any{"op": "stats"}, func() *reply { return new(reply) })
	if err != nil {
		return nil, err
	}
	s := rs[0].Stats
	for name, c := range s.Slots {
		if c.Selected < 0 || c.Completed < 0 || c.Fallback < 0 || c.Ineligible < 0 || c.Audited < 0 || c.Stock < 0 {
			return nil, fmt.Errorf("stats: slot %s: negative counters %+v", name, c)
		}
	}
	// The ranks of a tensor-parallel engine make the same slot calls with
	// the same shapes, strict: each must have selected, audited and
	// fallen back exactly as rank 0 did.
	for r := 1; r < len(rs); r++ {
		if !maps.Equal(s.Slots, rs[r].Slots) {
			return nil, &RankMismatchError{Step: "stats", Rank: r, Detail: fmt.Sprintf("slot counters %v against rank 0's %v", rs[r].Slots, s.Slots)}
		}
	}
	return &s, nil
}
