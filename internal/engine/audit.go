package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"

	"cacheon/internal/arena"
	"cacheon/internal/grade"
	"cacheon/internal/metric"
	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// Audit outcomes of one dump.
const (
	AuditPass = "PASS"
	AuditFail = "FAIL"
)

// AuditResult is the regrade of one audit dump.
type AuditResult struct {
	File    string  `json:"file"`
	Slot    string  `json:"slot"`
	Call    int     `json:"call"`
	Outcome string  `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
	Metric  string  `json:"metric,omitempty"`
	Score   float64 `json:"score"`
	Dims    string  `json:"dims,omitempty"`
}

// SlotLookup finds a registered slot; *slot.Catalog implements it.
type SlotLookup interface {
	Lookup(name string) (*slot.Spec, bool)
}

// dumpName is "<slot>-<n>.safetensors".
var dumpName = regexp.MustCompile(`^([a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+)-([0-9]{1,9})\.safetensors$`)

// AuditScalars are the scalar arguments the arena's model passes to each
// slot, from Go's own copy of the arena (never from the dump): the RMSNorm
// epsilon, causal prefill attention and an msa model's block size. Scalars not listed take the slot's
// registered expression (sm_scale = rsqrt(D)).
func AuditScalars(a *arena.Arena) (map[string]map[string]float64, error) {
	eps, err := a.Model.RMSNormEps.Float64()
	if err != nil {
		return nil, fmt.Errorf("audit scalars: %w", err)
	}
	sc := map[string]map[string]float64{
		"norm.rmsnorm":                   {"eps": eps},
		"collective.ar_residual_rmsnorm": {"eps": eps},
		"attention.sdpa":                 {"causal": 1},
	}
	if a.Model.Kind == arena.KindMSA {
		bs := float64(a.Model.MSABlockSize)
		sc["attention.msa_block_score"] = map[string]float64{"block_size": bs}
		sc["attention.msa_prefill_block_score"] = map[string]float64{"block_size": bs}
	}
	return sc, nil
}

// AuditSlots is slots as the audit of arena a grades them: on an msa arena
// the block-score slots are graded at the width the runtime selects (its
// msa_topk blocks per query) instead of the catalog's K, and every
// selected block must be a hit (overlap 1; a block within the dtype's
// tolerance of the K-th best counts as one). The catalog's K says too
// little when it is larger than msa_topk (the top K set may be right while
// the top msa_topk is not); its overlap of 0.875 lets a sheet drop any one
// block of 8, the best one included. A row of at most K blocks, whose set
// any order met, is graded by its ranking since session 23
// (metric.TopKOverlapScore), in verify as here.
func AuditSlots(slots SlotLookup, a *arena.Arena) SlotLookup {
	if a.Model.Kind != arena.KindMSA {
		return slots
	}
	return selectionWidth{slots, a.Model.MSATopK}
}

// selectionWidth grades the msa block-score slots at top-k.
type selectionWidth struct {
	SlotLookup
	k int
}

func (w selectionWidth) Lookup(name string) (*slot.Spec, bool) {
	spec, ok := w.SlotLookup.Lookup(name)
	if !ok || spec.Correctness.Metric != "topk_overlap" || !slices.Contains(Seams(arena.KindMSA), name) {
		return spec, ok
	}
	cp := *spec
	cp.Correctness.K, cp.Correctness.MinOverlap = w.k, "1"
	return &cp, true
}

// Regrade reads every audit dump in dir (files named
// <slot>-<n>.safetensors with metadata {"slot", "call"}; every input under
// its name as it was before the call, every entry input again under
// "in.<name>" as it was after, every output under its name), rebuilds the
// slot's inputs, checks that the candidate did not write to them, computes the trusted reference and grades every output
// with the slot's metric. Each dump is PASS or FAIL with a reason; an
// unreadable or inconsistent dump is a FAIL. Other files are ignored.
// Inputs and outputs are graded by package grade, as verify grades them.
func Regrade(dir string, slots SlotLookup, scalars map[string]map[string]float64) ([]AuditResult, error) {
	return regradeDir(dir, slots, scalars, nil)
}

// regradeDir is Regrade that leaves the files skip names to the caller.
func regradeDir(dir string, slots SlotLookup, scalars map[string]map[string]float64, skip func(slot string) bool) ([]AuditResult, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit regrade: %w", err)
	}
	var out []AuditResult
	var todo []int // indexes into out of the dumps to regrade
	var sizes []int64
	for _, ent := range ents {
		name := ent.Name()
		if filepath.Ext(name) != ".safetensors" {
			continue
		}
		r := AuditResult{File: name, Outcome: AuditFail, Call: -1}
		m := dumpName.FindStringSubmatch(name)
		switch {
		case m == nil:
			r.Reason = "unexpected dump name (want <slot>-<n>.safetensors)"
		case !ent.Type().IsRegular():
			r.Reason = "not a regular file"
		case skip != nil && skip(m[1]):
			continue
		default:
			r.Slot = m[1]
			r.Call, _ = strconv.Atoi(m[2])
			info, err := ent.Info()
			if err != nil {
				r.Reason = fmt.Sprintf("unreadable dump: %v", err)
				break
			}
			todo = append(todo, len(out))
			sizes = append(sizes, info.Size())
		}
		out = append(out, r)
	}
	regradeAll(len(todo), sizes, func(i int) {
		r := &out[todo[i]]
		regradeOne(filepath.Join(dir, r.File), slots, scalars[r.Slot], r)
	})
	sortAudit(out)
	return out, nil
}

// regradeBytes bounds the dump bytes regraded at once: a dump's regrade
// holds several float64 copies of its tensors (a prefill-sized dump of
// the 1B arena's silu is 268 MB of bfloat16).
const regradeBytes = 512 << 20

// regradeAll runs regrade(i) for i < n side by side, on as many cores as
// there are and with at most regradeBytes of dumps (sizes[i]) in flight;
// a dump larger than that runs alone. Each regrade writes only its own
// result, so the results do not depend on the order.
func regradeAll(n int, sizes []int64, regrade func(i int)) {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	var inFlight int64
	running := 0
	slots := max(1, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range n {
		w := min(sizes[i], regradeBytes)
		mu.Lock()
		for running > 0 && (running >= slots || inFlight+w > regradeBytes) {
			cond.Wait()
		}
		running++
		inFlight += w
		mu.Unlock()
		wg.Go(func() {
			regrade(i)
			mu.Lock()
			running--
			inFlight -= w
			cond.Broadcast()
			mu.Unlock()
		})
	}
	wg.Wait()
}

// sortAudit orders results by slot, call and file.
func sortAudit(out []AuditResult) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].Slot != out[j].Slot {
			return out[i].Slot < out[j].Slot
		}
		if out[i].Call != out[j].Call {
			return out[i].Call < out[j].Call
		}
		return out[i].File < out[j].File
	})
}

func regradeOne(path string, slots SlotLookup, scalars map[string]float64, r *AuditResult) {
	fail := func(format string, args ...any) { r.Outcome, r.Reason = AuditFail, fmt.Sprintf(format, args...) }
	spec, ok := slots.Lookup(r.Slot)
	if !ok {
		fail("unknown slot %s", r.Slot)
		return
	}
	f, err := safetensors.ReadFile(path, safetensors.Limits{})
	if err != nil {
		fail("unreadable dump: %v", err)
		return
	}
	if f.Metadata["slot"] != r.Slot || f.Metadata["call"] != strconv.Itoa(r.Call) {
		fail("metadata %q/%q does not match the file name", f.Metadata["slot"], f.Metadata["call"])
		return
	}
	inputs, why := dumpedInputs(spec, f)
	if why != "" {
		fail("%s", why)
		return
	}
	c, err := spec.CaseFromInputs(inputs, scalars)
	if err != nil {
		fail("inputs do not fit the slot contract: %v", err)
		return
	}
	gradeDumps(spec, c, []*safetensors.File{f}, false, r)
}

// gradeDumps grades the outputs of one call's dumps (one file, or with
// ranks one per rank, each named in a reason) against the reference of
// the case rebuilt from its inputs: the lowest score of any output is the
// result's, the first failure its reason, and it passes when none fails.
func gradeDumps(spec *slot.Spec, c *slot.Case, files []*safetensors.File, ranks bool, r *AuditResult) {
	fail := func(format string, args ...any) { r.Outcome, r.Reason = AuditFail, fmt.Sprintf(format, args...) }
	r.Dims = fmt.Sprint(map[string]int(c.Dims))
	want, why := expect(spec, c)
	if why != "" {
		fail("%s", why)
		return
	}
	r.Score = 1
	for rank, f := range files {
		where := ""
		if ranks {
			where = fmt.Sprintf("rank %d: ", rank)
		}
		res, err := want.grade(f.Tensors)
		for _, g := range res.Outputs {
			r.Metric = g.Metric
			r.Score = min(r.Score, g.Score)
		}
		if err != nil {
			fail("%s%v", where, err)
			return
		}
		if res.Failure != nil {
			fail("%s%s", where, auditReason(res.Failure))
			return
		}
	}
	r.Outcome, r.Reason = AuditPass, ""
}

// dumpedInputs reads a dump's inputs as they were before the call, under
// their own names; entry inputs are dumped again as they were after it
// under "in.<name>", and a candidate that wrote to an input fails. A
// non-empty why says what is missing or changed.
func dumpedInputs(spec *slot.Spec, f *safetensors.File) (map[string]*tensor.Tensor, string) {
	inputs := map[string]*tensor.Tensor{}
	for _, n := range spec.InputNames() {
		t := f.Tensors[n]
		if t == nil {
			return nil, fmt.Sprintf("input %s: missing from the dump", n)
		}
		inputs[n] = t
	}
	var sent []grade.Input
	for _, a := range spec.Args {
		if a.Kind == slot.ArgInput {
			sent = append(sent, grade.Input{Name: a.Name, Sent: inputs[a.Name]})
		}
	}
	if bad := grade.Inputs(f.Tensors, sent); bad != nil {
		return nil, auditReason(bad)
	}
	return inputs, ""
}

// expected is what a regraded call must have produced.
type expected struct {
	outs []slot.Output
	ref  map[string][]float64
	pol  metric.Policy
	tol  metric.Tolerance
}

// expect computes the case's outputs, reference and grading policy; a
// non-empty why says which could not be had.
func expect(spec *slot.Spec, c *slot.Case) (expected, string) {
	var e expected
	var err error
	if e.outs, err = c.Outputs(); err != nil {
		return e, fmt.Sprintf("output contract: %v", err)
	}
	if e.ref, err = c.Reference(); err != nil {
		return e, fmt.Sprintf("the dumped inputs are not valid for the slot: %v", err)
	}
	if e.pol, e.tol, err = spec.Policy(c.DType); err != nil {
		return e, fmt.Sprintf("policy: %v", err)
	}
	return e, ""
}

// grade grades a dump's tensors against e.
func (e expected) grade(got map[string]*tensor.Tensor) (grade.Result, error) {
	return grade.Outputs(e.pol, e.tol, e.outs, e.ref, got)
}

// auditReason words a grading failure for an audit result.
func auditReason(f *grade.Failure) string {
	switch f.Kind {
	case grade.InputMissing:
		return fmt.Sprintf("input %s: its value after the call (in.%s) is missing from the dump", f.Name, f.Name)
	case grade.InputMutated:
		return fmt.Sprintf("input mutation: the candidate wrote to input %q (inputs are read-only)", f.Name)
	case grade.OutputMissing:
		return fmt.Sprintf("output %s: missing from the dump", f.Name)
	case grade.OutputContract:
		return fmt.Sprintf("output %s is %s%v, the contract is %s%v", f.Name, f.Got.DType, f.Got.Shape, f.Want.DType, f.Want.Shape)
	}
	return fmt.Sprintf("output %s: %s %s", f.Name, f.Metric.Metric, f.Metric.Explain)
}

// AuditSlot summarizes the audit of one slot: how many dumps were
// regraded, how many failed, and the worst failure.
type AuditSlot struct {
	Slot   string `json:"slot"`
	Dumps  int    `json:"dumps"`
	Failed int    `json:"failed"`
	// Worst is the first failure that never reached a metric (an
	// unreadable dump, a mutated input, a missing output), else the failed
	// dump with the lowest score; nil when every dump passed.
	Worst *AuditResult `json:"worst,omitempty"`
}

// SummarizeAudit groups regraded dumps by slot, in slot order (dumps with
// no slot, from an unexpected file name, under "").
func SummarizeAudit(res []AuditResult) []AuditSlot {
	var out []AuditSlot
	at := map[string]int{}
	for _, r := range res {
		i, ok := at[r.Slot]
		if !ok {
			i = len(out)
			at[r.Slot] = i
			out = append(out, AuditSlot{Slot: r.Slot})
		}
		s := &out[i]
		s.Dumps++
		if r.Outcome == AuditPass {
			continue
		}
		s.Failed++
		if worse(r, s.Worst) {
			s.Worst = &r
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Slot < out[j].Slot })
	return out
}

// worse reports whether failure r is worse than the worst so far.
func worse(r AuditResult, worst *AuditResult) bool {
	switch {
	case worst == nil:
		return true
	case worst.Metric == "":
		return false
	case r.Metric == "":
		return true
	}
	return r.Score < worst.Score
}
