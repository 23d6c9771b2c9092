package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"cacheon/internal/arena"
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
// epsilon and causal prefill attention. Scalars not listed take the slot's
// registered expression (sm_scale = rsqrt(D)).
func AuditScalars(a *arena.Arena) (map[string]map[string]float64, error) {
	eps, err := a.Model.RMSNormEps.Float64()
	if err != nil {
		return nil, fmt.Errorf("audit scalars: %w", err)
	}
	return map[string]map[string]float64{
		"norm.rmsnorm":   {"eps": eps},
		"attention.sdpa": {"causal": 1},
	}, nil
}

// Regrade reads every audit dump in dir (files named
// <slot>-<n>.safetensors with metadata {"slot", "call"}; every input under
// its name as it was before the call, every entry input again under
// "in.<name>" as it was after, every output under its name), rebuilds the
// slot's inputs, checks that the candidate did not write to them, computes the trusted reference and grades every output
// with the slot's metric. Each dump is PASS or FAIL with a reason; an
// unreadable or inconsistent dump is a FAIL. Other files are ignored.
func Regrade(dir string, slots SlotLookup, scalars map[string]map[string]float64) ([]AuditResult, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit regrade: %w", err)
	}
	var out []AuditResult
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
		default:
			r.Slot = m[1]
			r.Call, _ = strconv.Atoi(m[2])
			regradeOne(filepath.Join(dir, name), slots, scalars[r.Slot], &r)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Slot != out[j].Slot {
			return out[i].Slot < out[j].Slot
		}
		if out[i].Call != out[j].Call {
			return out[i].Call < out[j].Call
		}
		return out[i].File < out[j].File
	})
	return out, nil
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
	// Inputs as they were before the call under their own names; entry
	// inputs again as they were after it under "in.<name>": a candidate
	// that wrote to an input fails.
	inputs := map[string]*tensor.Tensor{}
	for _, n := range spec.InputNames() {
		t := f.Tensors[n]
		if t == nil {
			fail("input %s: missing from the dump", n)
			return
		}
		inputs[n] = t
	}
	for _, a := range spec.Args {
		if a.Kind != slot.ArgInput {
			continue
		}
		after := f.Tensors["in."+a.Name]
		if after == nil {
			fail("input %s: its value after the call (in.%s) is missing from the dump", a.Name, a.Name)
			return
		}
		if before := inputs[a.Name]; after.DType != before.DType || !slices.Equal(after.Shape, before.Shape) || !bytes.Equal(after.Data, before.Data) {
			fail("input mutation: the candidate wrote to input %q (inputs are read-only)", a.Name)
			return
		}
	}
	c, err := spec.CaseFromInputs(inputs, scalars)
	if err != nil {
		fail("inputs do not fit the slot contract: %v", err)
		return
	}
	r.Dims = fmt.Sprint(map[string]int(c.Dims))
	outs, err := c.Outputs()
	if err != nil {
		fail("output contract: %v", err)
		return
	}
	expected, err := c.Reference()
	if err != nil {
		fail("the dumped inputs are not valid for the slot: %v", err)
		return
	}
	pol, tol, err := spec.Policy(c.DType)
	if err != nil {
		fail("policy: %v", err)
		return
	}
	r.Score = 1
	for _, o := range outs {
		got := f.Tensors[o.Name]
		if got == nil {
			fail("output %s: missing from the dump", o.Name)
			return
		}
		if got.DType != o.Spec.DType || !slices.Equal(got.Shape, o.Spec.Shape) {
			fail("output %s is %s%v, the contract is %s%v", o.Name, got.DType, got.Shape, o.Spec.DType, o.Spec.Shape)
			return
		}
		res, err := metric.Grade(pol, tol, expected[o.Name], got.Float64s(), o.Spec.Shape)
		if err != nil {
			fail("grading %s: %v", o.Name, err)
			return
		}
		r.Metric = res.Metric
		r.Score = min(r.Score, res.Score)
		if !res.Pass {
			fail("output %s: %s %s", o.Name, res.Metric, res.Explain)
			return
		}
	}
	r.Outcome, r.Reason = AuditPass, ""
}
