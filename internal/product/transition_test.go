package product_test

import (
	"bytes"
	"strings"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
	"cacheon/internal/target"
)

const (
	arRMS    = "collective.ar_residual_rmsnorm"
	finalize = "collective.moe_finalize_ar_rmsnorm"
)

// crownAll applies one crown per target in order, starting at genesis.
func crownAll(t *testing.T, cat *target.Catalog, targets ...string) product.EvaluationStack {
	t.Helper()
	s := producttest.Genesis(t, cat)
	for _, name := range targets {
		var err error
		s, err = product.ApplyCrown(cat, s, producttest.Crown(t, cat, s, name, "miner-"+name))
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func encoded(t *testing.T, o product.Object) []byte {
	t.Helper()
	b, _, err := product.Encode(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheckStack: a stack is checked against the catalog in force: every
// target registered with its specification digest, and no active target
// displaced by another.
func TestCheckStack(t *testing.T) {
	cat := producttest.Catalog(t)
	two := crownAll(t, cat, arRMS, silu)
	tests := []struct {
		name    string
		mutate  func(s *product.EvaluationStack)
		wantErr string
	}{
		{name: "consistent", mutate: func(*product.EvaluationStack) {}},
		{name: "other catalog", mutate: func(s *product.EvaluationStack) { s.Catalog = producttest.FakeDigest("catalog") }, wantErr: "catalog: "},
		{name: "unregistered target", mutate: func(s *product.EvaluationStack) { s.Entries[0].Target = "attention.fast" }, wantErr: "entries[0].target: \"attention.fast\" is not a registered target"},
		{name: "stale specification", mutate: func(s *product.EvaluationStack) { s.Entries[1].TargetSpec = producttest.FakeDigest("spec") }, wantErr: "entries[1].target_spec: "},
		{name: "active target displaced by another", mutate: func(s *product.EvaluationStack) {
			spec, _ := cat.TargetSpec(target.MoEEpilogue)
			s.Entries[0].Target, s.Entries[0].TargetSpec = target.MoEEpilogue, spec
		}, wantErr: "displaces the also active " + arRMS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := two
			s.Entries = append([]product.StackEntry(nil), two.Entries...)
			tt.mutate(&s)
			err := product.CheckStack(cat, &s)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckStack: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("CheckStack = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestCandidate(t *testing.T) {
	cat := producttest.Catalog(t)
	prop := producttest.FakeDigest("new proposal")
	stale := crownAll(t, cat, silu)
	stale.Catalog = producttest.FakeDigest("old catalog")
	cases := []struct {
		name          string
		inc           product.EvaluationStack
		target        string
		proposal      string
		wantErr       string
		wantActive    []string
		wantDisplaced []string
	}{
		{name: "singleton on genesis", inc: crownAll(t, cat), target: silu, proposal: prop, wantActive: []string{silu}, wantDisplaced: []string{}},
		{name: "replaces the holder of the same target", inc: crownAll(t, cat, silu, "norm.rmsnorm"), target: silu, proposal: prop, wantActive: []string{silu, "norm.rmsnorm"}, wantDisplaced: []string{}},
		{name: "atomic displaces its members' singletons", inc: crownAll(t, cat, arRMS, finalize, silu), target: target.MoEEpilogue, proposal: prop,
			wantActive: []string{silu, target.MoEEpilogue}, wantDisplaced: []string{arRMS, finalize}},
		{name: "singleton may not split an active atomic target", inc: crownAll(t, cat, target.MoEEpilogue), target: arRMS, proposal: prop, wantErr: "split active atomic target"},
		{name: "unregistered target", inc: crownAll(t, cat), target: "engine.whole", proposal: prop, wantErr: "not a registered target"},
		{name: "stale catalog", inc: stale, target: silu, proposal: prop, wantErr: "not the catalog in force"},
		{name: "bad proposal digest", inc: crownAll(t, cat), target: silu, proposal: "abc", wantErr: "transition.proposal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := encoded(t, &c.inc)
			got, err := product.Candidate(cat, c.inc, c.target, c.proposal)
			if !bytes.Equal(before, encoded(t, &c.inc)) {
				t.Fatal("Candidate modified the incumbent")
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			active := make([]string, len(got.Entries))
			for i, e := range got.Entries {
				active[i] = e.Target
			}
			if strings.Join(active, ",") != strings.Join(c.wantActive, ",") {
				t.Fatalf("active %v, want %v", active, c.wantActive)
			}
			if strings.Join(got.Displaced, ",") != strings.Join(c.wantDisplaced, ",") {
				t.Fatalf("displaced %v, want %v", got.Displaced, c.wantDisplaced)
			}
			incDigest, _ := product.Digest(&c.inc)
			if got.Incumbent != incDigest || got.Generation != c.inc.Generation || got.Arena != c.inc.Arena || got.Catalog != c.inc.Catalog {
				t.Fatalf("candidate does not derive from the incumbent: %+v", got)
			}
			// Exactly one transition: every other entry is the
			// incumbent's, unchanged.
			for _, e := range got.Entries {
				if e.Target == c.target {
					if e.Proposal != c.proposal || e.Crown != "" {
						t.Fatalf("transition entry %+v", e)
					}
					continue
				}
				found := false
				for _, ie := range c.inc.Entries {
					found = found || ie == e
				}
				if !found {
					t.Fatalf("entry %+v is not the incumbent's", e)
				}
			}
		})
	}
}

func TestApplyCrown(t *testing.T) {
	cat := producttest.Catalog(t)
	gen := producttest.Genesis(t, cat)
	one := crownAll(t, cat, silu)
	good := producttest.Crown(t, cat, one, "norm.rmsnorm", "miner-2")
	mut := func(f func(*product.CrownRecord)) product.CrownRecord {
		c := good
		f(&c)
		return c
	}
	cases := []struct {
		name    string
		inc     product.EvaluationStack
		crown   product.CrownRecord
		wantErr string
	}{
		{name: "crown updates the stack", inc: one, crown: good},
		{name: "crown measured against another stack", inc: gen, crown: good, wantErr: "incumbent"},
		{name: "applying a crown twice", inc: crownAll(t, cat, silu, "norm.rmsnorm"), crown: good, wantErr: "incumbent"},
		{name: "wrong generation", inc: one, crown: mut(func(c *product.CrownRecord) { c.Generation = 7 }), wantErr: "generation"},
		{name: "wrong arena", inc: one, crown: mut(func(c *product.CrownRecord) { c.Arena = producttest.FakeDigest("x") }), wantErr: "arena"},
		{name: "wrong catalog", inc: one, crown: mut(func(c *product.CrownRecord) { c.Catalog = producttest.FakeDigest("x") }), wantErr: "catalog"},
		{name: "stale target spec", inc: one, crown: mut(func(c *product.CrownRecord) { c.TargetSpec = producttest.FakeDigest("x") }), wantErr: "target_spec"},
		{name: "unregistered target", inc: one, crown: mut(func(c *product.CrownRecord) { c.Target = "engine.whole" }), wantErr: "not a registered target"},
		{name: "one evidence digest", inc: one, crown: mut(func(c *product.CrownRecord) { c.Evidence = c.Evidence[:1] }), wantErr: "two independent passing attempts"},
		{name: "speedup not above 1", inc: one, crown: mut(func(c *product.CrownRecord) { c.Speedup = "1" }), wantErr: "speedup"},
		{name: "non-canonical speedup", inc: one, crown: mut(func(c *product.CrownRecord) { c.Speedup = "1.50" }), wantErr: "speedup"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := encoded(t, &c.inc)
			got, err := product.ApplyCrown(cat, c.inc, c.crown)
			if !bytes.Equal(before, encoded(t, &c.inc)) {
				t.Fatal("ApplyCrown modified the incumbent")
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// generation + 1 and nothing else
			if got.Generation != c.inc.Generation+1 || got.Arena != c.inc.Arena || got.Catalog != c.inc.Catalog {
				t.Fatalf("stack header changed beyond the generation: %+v", got)
			}
			cd, _ := product.Digest(&c.crown)
			if len(got.Entries) != len(c.inc.Entries)+1 {
				t.Fatalf("%d entries", len(got.Entries))
			}
			for _, e := range got.Entries {
				if e.Target == c.crown.Target {
					if e.Crown != cd || e.Proposal != c.crown.Attribution.Proposal {
						t.Fatalf("crowned entry %+v", e)
					}
					continue
				}
				if e != c.inc.Entries[0] {
					t.Fatalf("entry %+v changed", e)
				}
			}
		})
	}
}

func TestIntegrate(t *testing.T) {
	w := newWorld(t)
	at := func(p string) int {
		for i, e := range w.source {
			if e.Path == p {
				return i
			}
		}
		t.Fatalf("no %s", p)
		return -1
	}
	changed := func(f func([]product.FileEntry)) []product.FileEntry {
		l := append([]product.FileEntry(nil), w.source...)
		f(l)
		return l
	}
	kernel := producttest.Prefix + "/kernel.py"
	cases := []struct {
		name    string
		source  []product.FileEntry
		prefix  string
		review  product.Review
		wantErr string
	}{
		{name: "preserved", source: w.source, prefix: producttest.Prefix, review: w.review},
		{name: "changed bytes", source: changed(func(l []product.FileEntry) { l[at(kernel)].SHA256 = producttest.FakeDigest("x") }), prefix: producttest.Prefix, review: w.review, wantErr: kernel + ": sha256"},
		{name: "changed size", source: changed(func(l []product.FileEntry) { l[at(kernel)].Size++ }), prefix: producttest.Prefix, review: w.review, wantErr: kernel + ": size"},
		{name: "missing file", source: changed(func(l []product.FileEntry) { l[at(kernel)].Path = producttest.Prefix + "/kernel2.py" }), prefix: producttest.Prefix, review: w.review, wantErr: kernel + ": missing"},
		{name: "wrong prefix", source: w.source, prefix: "elsewhere", review: w.review, wantErr: "elsewhere/kernel.py: missing"},
		{name: "unsorted listing", source: changed(func(l []product.FileEntry) { l[0], l[1] = l[1], l[0] }), prefix: producttest.Prefix, review: w.review, wantErr: "out of order"},
		{name: "invalid review", source: w.source, prefix: producttest.Prefix, review: product.Review{}, wantErr: "review.reviewer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := product.Integrate(w.crown, c.source, c.prefix, c.review)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sd, _ := product.SourceDigest(c.source)
			cd, _ := product.Digest(&w.crown)
			if r.Source.Digest != sd || r.Crown != cd || len(r.Preserved) != len(w.crown.SelectedPayload.Files) {
				t.Fatalf("record %+v", r)
			}
		})
	}
}

func TestNewRelease(t *testing.T) {
	w := newWorld(t)
	cat := w.cat
	sd, _ := product.SourceDigest(w.source)
	digests := map[string]string{"engine": sd}
	integrate := func(inc product.EvaluationStack, name string, review product.Review) product.IntegrationRecord {
		t.Helper()
		cr := producttest.Crown(t, cat, inc, name, "miner-"+name)
		l := w.source
		if name != silu {
			// a source tree for another target's payload
			dir := t.TempDir()
			producttest.WriteTree(t, dir, producttest.SourceFiles(producttest.Payload(name), producttest.Prefix))
			var err error
			if l, err = product.ScanTree(dir, product.SourceSkip); err != nil {
				t.Fatal(err)
			}
		}
		r, err := product.Integrate(cr, l, producttest.Prefix, review)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rejected := w.review
	rejected.Decision = product.DecisionRejected
	gen := producttest.Genesis(t, cat)
	atomicRec := integrate(gen, target.MoEEpilogue, w.review)
	arRec := integrate(gen, arRMS, w.review)
	otherSilu := integrate(crownAll(t, cat, "norm.rmsnorm"), silu, w.review)
	twoSources := map[string]string{"engine": sd, "extra": atomicRec.Source.Digest}
	base2 := w.base
	base2.Sources = append(append([]product.BaseSource{}, base2.Sources...), product.BaseSource{Name: "extra", Provenance: "a second reviewed tree"})
	cases := []struct {
		name    string
		base    product.ReleaseBase
		digests map[string]string
		records []product.IntegrationRecord
		wantErr string
		want    int
	}{
		{name: "one contribution", base: w.base, digests: digests, records: []product.IntegrationRecord{w.record}, want: 1},
		{name: "no contributions", base: w.base, digests: digests, records: nil, want: 0},
		{name: "two sources", base: base2, digests: twoSources, records: []product.IntegrationRecord{w.record, atomicRec}, want: 2},
		{name: "rejected review does not ship", base: w.base, digests: digests, records: []product.IntegrationRecord{integrate(gen, silu, rejected)}, wantErr: "only approved"},
		{name: "one crown covered twice", base: w.base, digests: digests, records: []product.IntegrationRecord{w.record, w.record}, wantErr: "already covered"},
		{name: "two crowns for one target", base: w.base, digests: digests, records: []product.IntegrationRecord{w.record, otherSilu}, wantErr: "already held"},
		{name: "atomic with its member singleton", base: base2, digests: map[string]string{"engine": arRec.Source.Digest, "extra": atomicRec.Source.Digest}, records: []product.IntegrationRecord{atomicRec, arRec}, wantErr: "split active atomic"},
		{name: "record over a tree not in the release", base: w.base, digests: digests, records: []product.IntegrationRecord{atomicRec}, wantErr: "source.digest"},
		{name: "source tree missing", base: w.base, digests: map[string]string{}, records: nil, wantErr: `source "engine"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := product.NewRelease(cat, c.base, c.digests, c.records)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Contributions) != c.want || m.Policy.Catalog != cat.Digest() {
				t.Fatalf("manifest %+v", m)
			}
		})
	}
}

func TestCheckCoverage(t *testing.T) {
	w := newWorld(t)
	rd, _ := product.Digest(&w.record)
	other := w.record
	other.Review.Notes = "a second record"
	od, _ := product.Digest(&other)
	rejected := w.record
	rejected.Review.Decision = product.DecisionRejected
	withAttr := func(m product.ReleaseManifest, c string) product.ReleaseManifest {
		m.Contributions = append([]product.Contribution(nil), m.Contributions...)
		m.Contributions[0].Attribution.Contributor = c
		return m
	}
	cases := []struct {
		name    string
		m       product.ReleaseManifest
		records map[string]product.IntegrationRecord
		wantErr string
	}{
		{name: "covered", m: w.release, records: map[string]product.IntegrationRecord{rd: w.record}},
		{name: "no record", m: w.release, records: map[string]product.IntegrationRecord{}, wantErr: "contributions[0].integration"},
		{name: "record left over", m: w.release, records: map[string]product.IntegrationRecord{rd: w.record, od: other}, wantErr: "covers no contribution"},
		{name: "attribution rewritten", m: withAttr(w.release, "someone-else"), records: map[string]product.IntegrationRecord{rd: w.record}, wantErr: "contributions[0].attribution"},
		{name: "not approved", m: w.release, records: map[string]product.IntegrationRecord{rd: rejected}, wantErr: "decision"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.m.CheckCoverage(c.records)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}
