package target

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/slot"
)

var update = flag.Bool("update", false, "rewrite golden files")

func newTestCatalog(t *testing.T) *Catalog {
	t.Helper()
	s, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCatalog(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTwelveTargets(t *testing.T) {
	c := newTestCatalog(t)
	ts := c.Targets()
	if len(ts) != 12 {
		t.Fatalf("%d targets, want 12", len(ts))
	}
	atomic := 0
	for _, tg := range ts {
		if tg.Kind == Atomic {
			atomic++
		}
		if len(tg.SpecDigest()) != 64 {
			t.Errorf("%s: spec digest %q", tg.Name, tg.SpecDigest())
		}
		for _, f := range tg.Features {
			if f == FeatureSetup {
				t.Errorf("%s allows setup", tg.Name)
			}
		}
	}
	if atomic != 1 {
		t.Fatalf("%d atomic targets, want 1", atomic)
	}
}

// TestCatalogDigestGolden pins the catalog digest: it must be the same on
// every run and machine, and change only with a deliberate contract change
// (then regenerate with: go test ./internal/target -update).
func TestCatalogDigestGolden(t *testing.T) {
	c := newTestCatalog(t)
	var b strings.Builder
	b.WriteString("catalog " + c.Digest() + "\n")
	for _, tg := range c.Targets() {
		b.WriteString(tg.Name + " " + tg.SpecDigest() + "\n")
	}
	path := filepath.Join("testdata", "digests.golden")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if string(want) != b.String() {
		t.Fatalf("catalog digests changed:\n%s\nwant:\n%s", b.String(), want)
	}
	// A second, independent construction gives the same digest.
	if d := newTestCatalog(t).Digest(); d != c.Digest() {
		t.Fatalf("digest not stable: %s vs %s", d, c.Digest())
	}
}

func TestConstructionChecks(t *testing.T) {
	slots, _ := slot.NewCatalog()
	mk := func(mut func(map[string]*Target)) error {
		ts := map[string]*Target{}
		for _, s := range []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm", "moe.fused_experts", "moe.fused_experts_reduce"} {
			ts[s] = &Target{Name: s, Kind: Singleton, Members: []string{s}}
		}
		ts["epi"] = &Target{Name: "epi", Kind: Atomic, Members: []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"},
			Displaces: []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"}}
		mut(ts)
		var list []*Target
		for _, tg := range ts {
			list = append(list, tg)
		}
		_, err := newCatalog(slots, list)
		return err
	}
	tests := []struct {
		name string
		mut  func(map[string]*Target)
		err  string
	}{
		{"valid", func(map[string]*Target) {}, ""},
		{"atomic must displace members", func(m map[string]*Target) { m["epi"].Displaces = m["epi"].Displaces[:1] }, "does not displace"},
		{"asymmetric compatibility", func(m map[string]*Target) { m["moe.fused_experts"].Compatible = []string{"moe.fused_experts_reduce"} }, "not symmetric"},
		{"cycle", func(m map[string]*Target) {
			m["collective.ar_residual_rmsnorm"].Displaces = []string{"epi"}
		}, "cycle"},
		{"setup feature", func(m map[string]*Target) { m["moe.fused_experts"].Features = []string{FeatureSetup} }, "never allowed"},
		{"unknown feature", func(m map[string]*Target) { m["moe.fused_experts"].Features = []string{"hotpatch"} }, "vocabulary"},
		{"unknown member", func(m map[string]*Target) { m["epi"].Members = []string{"x.y", "collective.ar_residual_rmsnorm"} }, "not a registered slot"},
		{"singleton name", func(m map[string]*Target) { m["moe.fused_experts"].Members = []string{"moe.fused_experts_reduce"} }, "same name"},
		{"displace unknown", func(m map[string]*Target) { m["epi"].Displaces = append(m["epi"].Displaces, "nope") }, "unregistered"},
		{"precedence without compat", func(m map[string]*Target) {
			m["moe.fused_experts"].Precedence = []string{"moe.fused_experts_reduce", "moe.fused_experts"}
		}, "not compatible"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mk(tt.mut)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	c := newTestCatalog(t)
	tests := []struct {
		name string
		req  Request
		want string
		err  string
	}{
		{"implicit singleton", Request{Slots: []string{"activation.silu_and_mul"}}, "activation.silu_and_mul", ""},
		{"explicit slot", Request{Target: "norm.rmsnorm", Mode: "slot", Slots: []string{"norm.rmsnorm", "norm.rmsnorm"}}, "norm.rmsnorm", ""},
		{"explicit atomic", Request{Target: MoEEpilogue, Mode: "atomic", Slots: []string{"collective.moe_finalize_ar_rmsnorm", "collective.ar_residual_rmsnorm"}, Features: []string{"process_group"}}, MoEEpilogue, ""},
		{"prepare allowed for moe", Request{Slots: []string{"moe.fused_experts"}, Features: []string{"prepare", "variants"}}, "moe.fused_experts", ""},
		{"system never crownable", Request{Target: "x", Mode: "system", Slots: []string{"norm.rmsnorm"}}, "", "not crownable"},
		{"two slots without request", Request{Slots: []string{"norm.rmsnorm", "activation.silu_and_mul"}}, "", "without a [competition] request"},
		{"unknown target", Request{Target: "attention.fast", Mode: "slot", Slots: []string{"attention.sdpa"}}, "", "not a registered target"},
		{"unknown slot", Request{Slots: []string{"attention.flash"}}, "", "not a registered slot"},
		{"atomic requested as slot", Request{Target: MoEEpilogue, Mode: "slot", Slots: []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"}}, "", "is a atomic target"},
		{"atomic missing member", Request{Target: MoEEpilogue, Mode: "atomic", Slots: []string{"collective.ar_residual_rmsnorm"}}, "", "exactly its members"},
		{"slot target extra slot", Request{Target: "norm.rmsnorm", Mode: "slot", Slots: []string{"norm.rmsnorm", "activation.silu_and_mul"}}, "", "exactly its members"},
		{"setup refused", Request{Slots: []string{"norm.rmsnorm"}, Features: []string{"setup"}}, "", "does not allow feature \"setup\""},
		{"prepare refused for silu", Request{Slots: []string{"activation.silu_and_mul"}, Features: []string{"prepare"}}, "", "does not allow"},
		{"unknown feature", Request{Slots: []string{"norm.rmsnorm"}, Features: []string{"patch_sglang"}}, "", "unknown feature"},
		{"target without mode", Request{Target: "norm.rmsnorm", Slots: []string{"norm.rmsnorm"}}, "", "no mode"},
		{"bad mode", Request{Target: "norm.rmsnorm", Mode: "whole", Slots: []string{"norm.rmsnorm"}}, "", "unknown mode"},
		{"no slots", Request{}, "", "fills no slot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Resolve(tt.req)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want {
				t.Fatalf("resolved %s, want %s", got.Name, tt.want)
			}
		})
	}
}

func TestActivate(t *testing.T) {
	c := newTestCatalog(t)
	ar, fin := "collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"
	tests := []struct {
		name          string
		active        []string
		add           string
		want, displac string
		err           string
	}{
		{"add to empty", nil, "norm.rmsnorm", "norm.rmsnorm", "", ""},
		{"replace same target", []string{"norm.rmsnorm"}, "norm.rmsnorm", "norm.rmsnorm", "", ""},
		{"atomic displaces singletons", []string{ar, fin, "norm.rmsnorm"}, MoEEpilogue, MoEEpilogue + ",norm.rmsnorm", ar + "," + fin, ""},
		{"refuse splitting atomic", []string{MoEEpilogue}, ar, "", "", "would split"},
		{"compatible both active", []string{"moe.fused_experts"}, "moe.fused_experts_reduce", "moe.fused_experts,moe.fused_experts_reduce", "", ""},
		{"unregistered", nil, "attention.fast", "", "", "not a registered target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, disp, err := c.Activate(tt.active, tt.add)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(next, ",") != tt.want || strings.Join(disp, ",") != tt.displac {
				t.Fatalf("next=%v displaced=%v", next, disp)
			}
		})
	}
}

func TestOwnerPrecedence(t *testing.T) {
	c := newTestCatalog(t)
	active := []string{"moe.fused_experts", "moe.fused_experts_reduce"}
	if o, _ := c.Owner(active, "moe.fused_experts_reduce"); o != "moe.fused_experts_reduce" {
		t.Fatalf("owner = %s", o)
	}
	if o, ok := c.Owner(active, "moe.fused_experts"); !ok || o != "moe.fused_experts" {
		t.Fatalf("owner = %s", o)
	}
	if o, ok := c.Owner([]string{MoEEpilogue}, "collective.ar_residual_rmsnorm"); !ok || o != MoEEpilogue {
		t.Fatalf("owner = %s", o)
	}
	if _, ok := c.Owner(nil, "norm.rmsnorm"); ok {
		t.Fatal("stock slot has an owner")
	}
}
