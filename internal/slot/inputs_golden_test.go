package slot

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/tensor"
)

var update = flag.Bool("update", false, "rewrite testdata/inputs.golden")

// TestInputsGolden pins the bytes the generator draws: for every slot and
// registered shape at seed 1, a case in one dtype and distribution (both
// taken in turn over the shapes), the serving case of the slot's first
// shape, and two later calls of each, one digest per case over every
// rank's inputs and scalars. A change that makes drawing faster must leave
// it as it is; a change of the generation rules changes InputGenerator
// (rng.go) and rewrites the file (go test ./internal/slot -run
// TestInputsGolden -update), whose first line names the generator.
func TestInputsGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("draws every slot's shapes")
	}
	cat, err := NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{InputGenerator}
	dtypes := []tensor.DType{tensor.BF16, tensor.F16, tensor.F32}
	k := 0
	for _, s := range cat.Specs() {
		ws := 1
		if s.Kind == Collective {
			ws = 2
		}
		for i, sh := range s.Shapes {
			p := CaseParams{Seed: 1, Shape: sh, DType: dtypes[k%len(dtypes)], Dist: Distributions()[k%len(Distributions())],
				Index: i, WorldSize: ws, ScalarPoint: i}
			k++
			for _, serving := range []bool{false, true} {
				if serving && i > 0 {
					continue
				}
				p.Serving = serving
				c, err := s.NewCase(p)
				if err != nil {
					lines = append(lines, fmt.Sprintf("%s %s serving=%v: %v", s.Name, sh.Name, serving, err))
					continue
				}
				digests := []string{inputsDigest(c)}
				for replay := 1; replay <= 2; replay++ {
					d := c.Clone()
					if err := d.RefreshAs(replay, Distributions()[(k+replay)%len(Distributions())]); err != nil {
						digests = append(digests, err.Error())
						continue
					}
					digests = append(digests, inputsDigest(d))
				}
				lines = append(lines, fmt.Sprintf("%s %s %s %s serving=%v %s", s.Name, sh.Name, p.DType, p.Dist, serving, strings.Join(digests, " ")))
			}
		}
	}
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "inputs.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/slot -run TestInputsGolden -update writes it)", err)
	}
	wl := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	if wl[0] != InputGenerator {
		t.Fatalf("%s was written for generator %s, this is %s: run with -update", path, wl[0], InputGenerator)
	}
	for i, line := range lines {
		if i >= len(wl) || wl[i] != line {
			old := "(none)"
			if i < len(wl) {
				old = wl[i]
			}
			t.Fatalf("generated inputs differ from %s under the same generator %s (a change of the rules changes InputGenerator):\n got %s\nwant %s", path, InputGenerator, line, old)
		}
	}
	if len(wl) != len(lines) {
		t.Fatalf("%s has %d lines, the catalog gives %d", path, len(wl), len(lines))
	}
}

// inputsDigest hashes a case's scalars and every rank's inputs (names in
// order, each with its dtype, shape and bytes) into 16 hex digits.
func inputsDigest(c *Case) string {
	h := sha256.New()
	names := make([]string, 0, len(c.Scalars))
	for n := range c.Scalars {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s=%x;", n, c.Scalars[n])
	}
	for r, rank := range c.Ranks {
		names = names[:0]
		for n := range rank {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			tn := rank[n]
			fmt.Fprintf(h, "%d/%s:%s%v:", r, n, tn.DType, tn.Shape)
			binary.Write(h, binary.LittleEndian, int64(len(tn.Data)))
			h.Write(tn.Data)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
