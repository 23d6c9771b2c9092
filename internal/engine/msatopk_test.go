package engine

import (
	"io/fs"
	"regexp"
	"strconv"
	"testing"

	"cacheon/internal/arena"
	"cacheon/internal/slot"
	"cacheon/python"
)

// TestMaxMSATopK: an msa arena may select no more blocks than the MSA
// sheets' topk_overlap grades the ranking of (arena.MaxMSATopK), so a
// sheet exact only in its graded top K cannot serve an arena wrong.
func TestMaxMSATopK(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range Seams(arena.KindMSA) {
		spec, ok := cat.Lookup(name)
		if !ok || spec.Correctness.Metric != "topk_overlap" {
			continue
		}
		n++
		if spec.Correctness.K != arena.MaxMSATopK {
			t.Errorf("%s grades the top %d, arena.MaxMSATopK is %d", name, spec.Correctness.K, arena.MaxMSATopK)
		}
	}
	if n != 2 {
		t.Errorf("%d msa seams graded by topk_overlap; want the decode and prefill sheets", n)
	}
	// the runtime's own model check refuses the same (engine/config.py)
	src, err := fs.ReadFile(python.Files(), "cacheon_runtime/engine/config.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MAX_MSA_TOPK = ([0-9]+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("engine/config.py has no MAX_MSA_TOPK")
	}
	if v, _ := strconv.Atoi(string(m[1])); v != arena.MaxMSATopK {
		t.Errorf("the runtime's MAX_MSA_TOPK is %d, arena.MaxMSATopK %d", v, arena.MaxMSATopK)
	}
}
