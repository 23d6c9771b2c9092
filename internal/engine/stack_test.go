package engine

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"cacheon/internal/arena"
	"cacheon/internal/slot"
)

// TestVerifiedCounts: every slot with a count is cut at its MaxCount (a
// call one above it is outside every variant's domain), and the cut is in
// the domain the runtime loads.
func TestVerifiedCounts(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"activation.silu_and_mul": "num_tokens", "attention.decode": "batch_size",
		"attention.msa_block_score": "batch_size", "moe.fused_experts": "num_tokens"}
	for _, spec := range cat.Specs() {
		f := spec.CountField()
		if w, ok := want[spec.Name]; ok && f != w {
			t.Errorf("%s: count field %q, want %q", spec.Name, f, w)
		}
		if spec.Count == "" {
			continue
		}
		if f == "" {
			t.Errorf("%s: count %s is no descriptor field", spec.Name, spec.Count)
			continue
		}
		d, err := VerifiedCounts(spec)
		if err != nil {
			t.Fatal(err)
		}
		if ok, why := d.Match(map[string]any{f: spec.MaxCount}); !ok {
			t.Errorf("%s: %s = MaxCount %d refused: %s", spec.Name, f, spec.MaxCount, why)
		}
		if ok, _ := d.Match(map[string]any{f: spec.MaxCount + 1}); ok {
			t.Errorf("%s: %s = %d (above MaxCount) admitted", spec.Name, f, spec.MaxCount+1)
		}
		canon, err := json.Marshal(d.Canonical())
		if err != nil {
			t.Fatal(err)
		}
		if want := `"max":` + strconv.Itoa(spec.MaxCount); !strings.Contains(string(canon), want) {
			t.Errorf("%s: canonical domain %s lacks %s", spec.Name, canon, want)
		}
	}
}

// TestShippedArenaDimsVerified: every width a shipped arena serves a slot
// at (the MLP width per rank, the hidden size, the heads per rank with the
// head dimension, MoE's hidden and intermediate widths, an msa indexer's
// heads, width and block size over its widest sheet (the decode table's
// keys, a prefill chunk ending at max_position), the decode page table's
// width and its cache's page count) is one of the shapes verify runs the slot on (registered or
// served): a kernel tiled for narrower rows, or honest only in narrower
// tables, fewer heads or smaller caches, would otherwise be wrong only
// where it is served. Each group of fields is matched by one shape.
func TestShippedArenaDimsVerified(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../arenas/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("arenas: %v %v", files, err)
	}
	type group map[string]int
	for _, f := range files {
		a, err := arena.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		m, r := a.Model, a.Engine.Ranks()
		heads := group{"num_heads": m.NumHeads / r, "num_kv_heads": m.NumKVHeads / r, "head_dim": m.HeadDim}
		hidden := []group{{"hidden_dim": m.HiddenSize}}
		want := map[string][]group{
			"activation.silu_and_mul": {{"hidden_dim": m.IntermediateSize / r}},
			"norm.rmsnorm":            hidden,
			"attention.decode":        {heads, {"seq_len": tableSeqLen(a)}, {"PAGES": a.Engine.KVPages}},
			"attention.sdpa":          {heads},
			"attention.msa_block_score": {{"num_heads": m.IndexHeads, "head_dim": m.IndexHeadDim,
				"block_size": m.MSABlockSize, "seq_len": tableSeqLen(a)}},
			"attention.msa_prefill_block_score": {{"head_dim": m.IndexHeadDim, "block_size": m.MSABlockSize,
				"seq_len": m.MaxPosition}},
			"moe.fused_experts":                  {{"hidden_dim": m.HiddenSize}, {"intermediate_dim": m.IntermediateSize}},
			"moe.fused_experts_reduce":           hidden,
			"collective.all_reduce":              hidden,
			"collective.ar_residual_rmsnorm":     hidden,
			"collective.moe_finalize_ar_rmsnorm": hidden,
		}
		for _, name := range ArenaSeams(a) {
			groups, ok := want[name]
			if !ok {
				t.Errorf("%s serves %s: the test names no widths for it", a.Name, name)
				continue
			}
			spec, _ := cat.Lookup(name)
			for _, g := range groups {
				found := false
				var seen []map[string]int
				for _, sh := range append(slices.Clone(spec.Shapes), spec.ServedShapes...) {
					dims := maps.Clone(sh.Dims)
					if spec.Kind == slot.Collective {
						dims["WS"] = r
					}
					d, err := spec.DescriptorOf(dims)
					if err != nil {
						t.Fatal(err)
					}
					got := map[string]int{}
					for field := range g {
						if v, ok := sh.Dims[field]; ok { // a dimension no descriptor field names (PAGES)
							got[field] = v
						} else {
							got[field] = d[field]
						}
					}
					seen = append(seen, got)
					found = found || maps.Equal(got, map[string]int(g))
				}
				if !found {
					t.Errorf("%s serves %s at %v; verify's shapes have %v (add a served shape)", a.Name, name, g, seen)
				}
			}
		}
	}
}

// tableSeqLen is the seq_len descriptor of the arena's decode calls: its
// block_table's width (the runtime's max_pages_per_seq, config.py: the
// context, max_position up to 8192, in pages) times the page size.
func tableSeqLen(a *arena.Arena) int {
	ps := a.Engine.PageSize
	return (min(a.Model.MaxPosition, 8192) + ps - 1) / ps * ps
}
