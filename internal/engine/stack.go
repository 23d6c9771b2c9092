package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"cacheon/internal/arena"
	"cacheon/internal/bundle"
	"cacheon/internal/capability"
	"cacheon/internal/scan"
	"cacheon/internal/slot"
)

// Seams lists the slots the arena runtime's data plane dispatches for a
// model kind, sorted: a dense model's MLP calls silu_and_mul, a mixtral
// model's experts (SwiGLU inside) are one fused_experts call, and an msa
// model's attention is the runtime's own over the blocks it selected from
// the score sheets of attention.msa_prefill_block_score (prompts) and
// attention.msa_block_score (decode steps).
func Seams(kind string) []string {
	var s []string
	switch kind {
	case arena.KindMixtral:
		s = []string{"moe.fused_experts", "attention.decode", "attention.sdpa", "norm.rmsnorm"}
	case arena.KindMSA:
		s = []string{"activation.silu_and_mul", "attention.msa_block_score", "attention.msa_prefill_block_score", "norm.rmsnorm"}
	default:
		s = []string{"activation.silu_and_mul", "attention.decode", "attention.sdpa", "norm.rmsnorm"}
	}
	sort.Strings(s)
	return s
}

// StackSpec is one slot of a stack file: which bundle fills it, and which
// of the bundle's variants ("" when the bundle has one row for the slot).
type StackSpec struct {
	Slot    string `json:"slot"`
	Bundle  string `json:"bundle"` // absolute
	Variant string `json:"variant,omitempty"`
}

// stackFile is the on-disk form:
//
//	[slots."activation.silu_and_mul"]
//	bundle = "../examples/silu_torch"   # relative to the stack file
//	variant = "default"                 # optional
//
// or the same as JSON: {"slots": {"activation.silu_and_mul": {"bundle": ..}}}.
type stackFile struct {
	Slots map[string]stackFileSlot `toml:"slots" json:"slots"`
}

type stackFileSlot struct {
	Bundle  string `toml:"bundle" json:"bundle"`
	Variant string `toml:"variant" json:"variant"`
}

// LoadStackFile reads a stack file (TOML, or JSON when it ends in .json),
// strictly, and resolves bundle paths against its directory. The result is
// sorted by slot.
func LoadStackFile(path string) ([]StackSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("stack file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 1<<20+1))
	if err != nil {
		return nil, fmt.Errorf("stack file %s: %w", path, err)
	}
	if len(data) > 1<<20 {
		return nil, fmt.Errorf("stack file %s: larger than 1 MiB", path)
	}
	return parseStackFile(path, data)
}

// parseStackFile decodes a stack file's bytes (JSON when path ends in
// .json, else TOML); relative bundle paths are taken from path's directory.
func parseStackFile(path string, data []byte) ([]StackSpec, error) {
	var sf stackFile
	var err error
	if strings.HasSuffix(path, ".json") {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(&sf)
	} else {
		err = toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&sf)
	}
	if err != nil {
		return nil, fmt.Errorf("stack file %s: %w", path, stackDecodeError(err, path, data))
	}
	if len(sf.Slots) == 0 {
		return nil, fmt.Errorf("stack file %s: no [slots.\"NAME\"] entries", path)
	}
	dir := filepath.Dir(path)
	var out []StackSpec
	for name, s := range sf.Slots {
		if s.Bundle == "" {
			return nil, fmt.Errorf("stack file %s: slot %s: bundle is required", path, name)
		}
		p := s.Bundle
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("stack file %s: slot %s: %w", path, name, err)
		}
		out = append(out, StackSpec{Slot: name, Bundle: abs, Variant: s.Variant})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot < out[j].Slot })
	return out, nil
}

func stackDecodeError(err error, path string, data []byte) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		de := &strict.Errors[0]
		line, col := de.Position()
		return fmt.Errorf("%d:%d: unknown field %s (a stack file has [slots.\"NAME\"] tables with bundle and variant)", line, col, strings.Join(de.Key(), "."))
	}
	// A value of the wrong type: the decoders name Go types; say which
	// key wants what instead.
	if msg := stackTypeError(path, data); msg != "" {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return fmt.Errorf("%d:%d: %s", line, col, msg)
		}
		return errors.New(msg)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		return fmt.Errorf("%d:%d: %s", line, col, strings.TrimPrefix(de.Error(), "toml: "))
	}
	return err
}

// stackTypeError decodes the file untyped and names the first key whose
// value has the wrong type ("" when there is none, or the file does not
// even parse).
func stackTypeError(path string, data []byte) string {
	var top map[string]any
	var err error
	if strings.HasSuffix(path, ".json") {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		err = dec.Decode(&top)
	} else {
		err = toml.Unmarshal(data, &top)
	}
	if err != nil {
		return ""
	}
	slots, ok := top["slots"]
	if !ok {
		return ""
	}
	tables, ok := slots.(map[string]any)
	if !ok {
		return "slots: want a table of [slots.\"NAME\"] tables, got " + kindOf(slots)
	}
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		tbl, ok := tables[name].(map[string]any)
		if !ok {
			return fmt.Sprintf("slots.%q: want a table with bundle and variant, got %s", name, kindOf(tables[name]))
		}
		for _, key := range []string{"bundle", "variant"} {
			if v, ok := tbl[key]; ok {
				if _, isStr := v.(string); !isStr {
					return fmt.Sprintf("slots.%q.%s: want a string, got %s", name, key, kindOf(v))
				}
			}
		}
	}
	return ""
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	case json.Number, int64, float64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

// SlotFromBundle picks the admitted bundle's row for the slot spec (and
// variant, "" when the bundle has exactly one row for it) and returns the
// stack entry the runtime loads, its domain cut to the verified counts
// (VerifiedCounts): only a bundle that passed the scan can fill a slot.
// Errors do not name the bundle's directory (a snapshot): the caller names
// the bundle.
func SlotFromBundle(a *scan.Admitted, spec *slot.Spec, variant string) (SlotEntry, error) {
	slotName := spec.Name
	b := a.Bundle()
	rows := b.Rows(slotName)
	if len(rows) == 0 {
		return SlotEntry{}, fmt.Errorf("the bundle has no [[ops]] row for slot %s", slotName)
	}
	var pick *bundle.Op
	var have []string
	for i := range rows {
		have = append(have, rows[i].Variant)
		if rows[i].Variant == variant || (variant == "" && len(rows) == 1) {
			pick = &rows[i]
		}
	}
	if pick == nil {
		if variant == "" {
			return SlotEntry{}, fmt.Errorf("the bundle has variants %s for slot %s: name one (variant = ...)", strings.Join(have, ", "), slotName)
		}
		return SlotEntry{}, fmt.Errorf("the bundle has no variant %q for slot %s (has %s)", variant, slotName, strings.Join(have, ", "))
	}
	verified, err := VerifiedCounts(spec)
	if err != nil {
		return SlotEntry{}, err
	}
	return SlotEntry{Bundle: b.Dir, Source: pick.Source, Entry: pick.Entry, Prepare: pick.Prepare,
		Variant: pick.Variant, Domain: pick.Domain.Intersect(verified).Canonical()}, nil
}

// VerifiedCounts is the part of a slot's calls that verify grades a
// variant on: counts (tokens, batch rows) up to the slot's MaxCount. The
// engine selects a variant only inside it (SlotFromBundle intersects the
// variant's domain with it), so a call with more rows than verify ever
// sent (a prefill chunk of 8192 tokens through silu, whose MaxCount is
// 4096) runs stock, counted ineligible, instead of a kernel no grade saw
// at that size.
func VerifiedCounts(spec *slot.Spec) (capability.Domain, error) {
	f := spec.CountField()
	if f == "" || spec.MaxCount <= 0 {
		return capability.Domain{}, nil
	}
	d, err := capability.AtMost(f, int64(spec.MaxCount))
	if err != nil {
		return capability.Domain{}, fmt.Errorf("slot %s: count bound: %w", spec.Name, err)
	}
	return d, nil
}

// CollectiveSlots are the slots a tensor-parallel engine reduces through.
func CollectiveSlots() []string {
	return []string{"collective.all_reduce", "collective.ar_residual_rmsnorm", "moe.fused_experts_reduce"}
}

// ArenaSeams lists the slots the arena runtime dispatches for an arena,
// sorted: Seams of its model kind on one rank; tensor parallel, the dense
// model's MLP is followed by collective.all_reduce, attention by
// collective.ar_residual_rmsnorm (the sum, the residual add and the MLP's
// norm), and a mixtral model's experts are moe.fused_experts_reduce (the
// experts on the rank's shards and their sum) instead of
// moe.fused_experts (with engine.moe_path = "deep",
// collective.moe_finalize_ar_rmsnorm after validator-owned expert GEMMs).
func ArenaSeams(a *arena.Arena) []string {
	s := Seams(a.Model.Kind)
	if a.Engine.Ranks() == 1 {
		return s
	}
	s = append(s, "collective.ar_residual_rmsnorm")
	if a.Model.Kind == arena.KindMixtral {
		s = slices.DeleteFunc(s, func(x string) bool { return x == "moe.fused_experts" })
		if a.Engine.MoEPath == arena.MoEPathDeep {
			s = append(s, "collective.moe_finalize_ar_rmsnorm")
		} else {
			s = append(s, "moe.fused_experts_reduce")
		}
	} else {
		s = append(s, "collective.all_reduce")
	}
	sort.Strings(s)
	return s
}

// CheckStack refuses stack slots the arena's model never dispatches.
func CheckStack(a *arena.Arena, slots []string) error {
	seams := ArenaSeams(a)
	for _, s := range slots {
		if !slices.Contains(seams, s) {
			return fmt.Errorf("the arena runtime has no seam for slot %s in a %s model on %d rank(s) (seams: %s)", s, a.Model.Kind, a.Engine.Ranks(), strings.Join(seams, ", "))
		}
	}
	return nil
}
