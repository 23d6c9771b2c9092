package referee

import (
	"context"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"

	"cacheon/internal/bundle"
	"cacheon/internal/canon"
	"cacheon/internal/evidence"
	"cacheon/internal/product"
)

// Qualification is what qualify decided over one or two attempts.
type Qualification struct {
	Attempts []QualifiedAttempt `json:"attempts"`
	// Crowned is set when every attempt (two by default) passed.
	Crowned bool `json:"crowned"`
	// Speedup is the crown speedup: the lower r of the passing attempts.
	Speedup canon.Decimal `json:"speedup,omitempty"`
	// Verdict is the first attempt verdict that was not PASS, or PASS.
	Verdict Verdict `json:"verdict"`
}

// QualifiedAttempt is one attempt with where its evidence is.
type QualifiedAttempt struct {
	Ref    evidence.Ref  `json:"evidence"`
	Order  string        `json:"order"` // the engine placement (as in the sealed plan)
	Record AttemptRecord `json:"record"`
}

// Qualify runs up to attempts attempts of p (each independent: its own
// secret, seeds, selection and evidence; the second with the placement
// swapped), stopping at the first that does not pass. A crown needs every
// attempt to pass; its speedup is the lowest r.
func (r *Referee) Qualify(ctx context.Context, p Proposal, attempts int) (*Qualification, error) {
	if attempts < 1 || attempts > 2 {
		return nil, fmt.Errorf("qualify: %d attempts: want 1 or 2", attempts)
	}
	q := &Qualification{}
	var lowest *big.Rat
	for n := 1; n <= attempts; n++ {
		r.say("attempt %d of %d", n, attempts)
		rec, ref, err := r.Attempt(ctx, p, n)
		if err != nil {
			return nil, err
		}
		q.Attempts = append(q.Attempts, QualifiedAttempt{Ref: ref, Order: order(n), Record: *rec})
		if rec.Verdict.Outcome != Pass {
			q.Verdict = rec.Verdict
			return q, nil
		}
		ratio, err := rat(rec.Speed.Ratio)
		if err != nil {
			return nil, fmt.Errorf("qualify: attempt %d ratio: %w", n, err)
		}
		if lowest == nil || ratio.Cmp(lowest) < 0 {
			lowest, q.Speedup = ratio, rec.Speed.Ratio
		}
	}
	q.Verdict = Passed(fmt.Sprintf("%d passing attempt(s); speedup %s", attempts, q.Speedup))
	q.Crowned = attempts == 2
	return q, nil
}

// CrownInput is what a crown record needs besides the qualification.
type CrownInput struct {
	Catalog     product.Catalog
	ArenaDigest string
	Target      string
	Contributor string
	// Bundle is the admitted candidate directory and its content hash.
	BundleDir, ContentHash string
	// Incumbent is the evaluation stack the crown was measured against
	// (nil = the arena's genesis stack); the crown creates its generation
	// + 1.
	Incumbent *product.EvaluationStack
}

// CrownRecord builds the crown record integrate takes from a crowned
// qualification over the incumbent evaluation stack (the genesis stack
// unless CrownInput.Incumbent says otherwise): the incumbent's generation
// + 1, the bundle's files as the selected payload, the two attempts as
// evidence.
func CrownRecord(q *Qualification, in CrownInput) (product.CrownRecord, error) {
	if !q.Crowned {
		return product.CrownRecord{}, fmt.Errorf("crown record: the qualification did not crown (%v)", q.Verdict)
	}
	spec, ok := in.Catalog.TargetSpec(in.Target)
	if !ok {
		return product.CrownRecord{}, fmt.Errorf("crown record: %s is not a registered target", in.Target)
	}
	inc := in.Incumbent
	if inc == nil {
		g := product.Genesis(in.ArenaDigest, in.Catalog)
		inc = &g
	}
	incumbent, err := product.Digest(inc)
	if err != nil {
		return product.CrownRecord{}, fmt.Errorf("crown record: %w", err)
	}
	payload, err := selectedPayload(in.BundleDir)
	if err != nil {
		return product.CrownRecord{}, err
	}
	var ev []string
	for _, a := range q.Attempts {
		ev = append(ev, a.Ref.Digest)
	}
	slices.Sort(ev)
	c := product.CrownRecord{Arena: in.ArenaDigest, Catalog: in.Catalog.Digest(), Incumbent: incumbent, Generation: inc.Generation + 1,
		Target: in.Target, TargetSpec: spec, Attribution: product.Attribution{Contributor: in.Contributor, Proposal: in.ContentHash},
		SelectedPayload: payload, Speedup: q.Speedup, Evidence: ev}
	if err := c.Validate(); err != nil {
		return product.CrownRecord{}, fmt.Errorf("crown record: %w", err)
	}
	return c, nil
}

// selectedPayload lists every file of the admitted bundle (those its
// content hash covers) with its SHA-256 and size.
func selectedPayload(dir string) (product.SelectedPayload, error) {
	files, err := bundle.Files(dir)
	if err != nil {
		return product.SelectedPayload{}, fmt.Errorf("selected payload: %w", err)
	}
	var out []product.PayloadFile
	for _, f := range files {
		e, err := product.HashFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return product.SelectedPayload{}, fmt.Errorf("selected payload: %s: %w", f.Path, err)
		}
		out = append(out, product.PayloadFile{Path: f.Path, SHA256: e.SHA256, Size: e.Size})
	}
	return product.NewSelectedPayload(out)
}
