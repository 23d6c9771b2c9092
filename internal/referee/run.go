package referee

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"cacheon/internal/arena"
	"cacheon/internal/bundle"
	"cacheon/internal/engine"
	"cacheon/internal/evidence"
	"cacheon/internal/fault"
	"cacheon/internal/product"
	"cacheon/internal/target"
)

// Request is one qualification as a validator asks for it.
type Request struct {
	Arena *arena.Arena // workload selected
	// Candidate is the candidate bundle (directory or archive); Target the
	// registered singleton target it replaces ("" = the manifest's
	// [competition] target, else its only slot).
	Candidate, Target string
	// Incumbent is the incumbent stack (nil = stock).
	Incumbent []engine.StackSpec
	Attempts  int
	// Attempt, when positive, runs only that attempt (1 or 2; 2 with the
	// placement swapped) of the qualification: a validator takes each
	// attempt under its own lease, the reproduction later than the first.
	// No crown record: the validator settles the two attempts itself.
	Attempt int
	// IncumbentDigest, when set, is how the plan names the incumbent (a
	// validator's settled evaluation stack); "" = the digest of the stock
	// stack or of Incumbent's slot → content hash listing.
	IncumbentDigest string
	// Repeat, when positive, measures instead of deciding: that many
	// attempts, placement alternating (Referee.Repeat); no crown.
	Repeat int
	// Contributor is credited in the crown record.
	Contributor string
	Targets     *target.Catalog
}

// Result is a qualification's outcome.
type Result struct {
	Target        string         `json:"target"`
	ContentHash   string         `json:"content_hash,omitempty"`
	Screen        string         `json:"screen,omitempty"`
	Qualification *Qualification `json:"qualification,omitempty"`
	Repetition    *Repetition    `json:"repetition,omitempty"`
	// Crown is the crown record integrate takes (a crowned candidate over
	// the stock stack); CrownDigest its digest.
	Crown       *product.CrownRecord `json:"crown,omitempty"`
	CrownDigest string               `json:"crown_digest,omitempty"`
	Verdict     Verdict              `json:"verdict"`
}

// LoadCalibration reads a calibration file (the canonical envelope calibrate
// writes), checks it was made for want (the arena, the device's model and
// the runtime), and seals it in the store. A calibration that cannot be
// read, is not canonical or was made for something else is the caller's
// input, not the candidate's fault (fault.UsageErr: qualify exits 1, not
// 2, which would read as a candidate FAIL).
func LoadCalibration(store *evidence.Store, path string, want Provenance) (*Calibration, evidence.Ref, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, evidence.Ref{}, fault.UsageErr(fmt.Errorf("calibration: %w", err))
	}
	if n := len(data); n > 0 && data[n-1] == '\n' {
		data = data[:n-1]
	}
	sum := sha256.Sum256(data)
	ref := evidence.Ref{Domain: DomainCalibration, Digest: hex.EncodeToString(sum[:])}
	cal, err := evidence.Decode[Calibration](ref, data)
	if err != nil {
		return nil, evidence.Ref{}, fault.UsageErr(fmt.Errorf("calibration %s: %w", path, err))
	}
	if err := cal.Validate(); err != nil {
		return nil, evidence.Ref{}, fault.UsageErr(fmt.Errorf("calibration %s: %w", path, err))
	}
	if err := cal.Matches(want); err != nil {
		return nil, evidence.Ref{}, fault.UsageErr(fmt.Errorf("calibration %s %w", path, err))
	}
	sealed, err := store.Put(DomainCalibration, cal)
	if err != nil {
		return nil, evidence.Ref{}, fault.InfraErr(err)
	}
	if sealed != ref {
		return nil, evidence.Ref{}, fault.UsageErr(fmt.Errorf("calibration %s: not in canonical form (sealed as %s, file digest %s)", path, sealed.Digest, ref.Digest))
	}
	return &cal, sealed, nil
}

// Run screens the candidate, runs the attempts and, for a crown over the
// stock stack, builds the crown record.
func (r *Referee) Run(ctx context.Context, req Request) (*Result, error) {
	res := &Result{}
	if req.Target != "" {
		if _, ok := req.Targets.Lookup(req.Target); !ok {
			return nil, fault.UsageErr(fmt.Errorf("qualify: %s is not a registered target (cacheon targets lists them)", req.Target))
		}
	}
	scr, v := Screen(ctx, req.Candidate, req.Arena, r.Slots, r.Python, r.ScratchRoot, r.Progress)
	if v.Outcome != "" {
		res.Verdict = v
		return res, nil
	}
	defer scr.Close()
	res.Screen = screenDetail(scr.Report)
	res.ContentHash = scr.ContentHash()
	b := scr.Job.Admitted.Bundle()
	res.Target = req.Target
	if res.Target == "" {
		switch {
		case b.Manifest.Competition != nil:
			res.Target = b.Manifest.Competition.Target
		case len(b.Manifest.Ops) == 1:
			res.Target = b.Manifest.Ops[0].Slot
		default:
			return nil, fault.UsageErr(fmt.Errorf("qualify: the bundle names no [competition] target and has %d rows: give --target", len(b.Manifest.Ops)))
		}
	}
	t, ok := req.Targets.Lookup(res.Target)
	if !ok {
		return nil, fault.UsageErr(fmt.Errorf("qualify: %s is not a registered target (cacheon targets lists them)", res.Target))
	}
	var err error
	inc := req.IncumbentDigest
	if inc == "" {
		if inc, err = r.incumbentDigest(ctx, req); err != nil {
			return nil, err
		}
	}
	p := Proposal{Arena: req.Arena, Incumbent: req.Incumbent, Candidate: engine.StackSpec{Slot: t.Members[0], Bundle: scr.Dir()},
		IncumbentDigest: inc, CandidateHash: res.ContentHash}
	if len(t.Members) > 1 {
		// An atomic target replaces every member at once, each with the
		// bundle's kernel for it.
		for _, m := range t.Members {
			if !slices.ContainsFunc(b.Manifest.Ops, func(op bundle.Op) bool { return op.Slot == m }) {
				res.Verdict = Because(ReasonNeverFired, "the bundle has no kernel for %s, a member of the atomic target %s", m, t.Name)
				return res, nil
			}
		}
		p.Target, p.Members = t.Name, t.Members
	}
	if req.Repeat > 0 {
		res.Repetition, err = r.Repeat(ctx, p, req.Repeat)
		return res, err
	}
	if req.Attempt > 0 {
		if req.Attempt > 2 {
			return nil, fault.UsageErr(fmt.Errorf("qualify: attempt %d: want 1 or 2", req.Attempt))
		}
		rec, ref, err := r.Attempt(ctx, p, req.Attempt)
		if err != nil {
			return nil, err
		}
		res.Qualification = &Qualification{Attempts: []QualifiedAttempt{{Ref: ref, Order: order(req.Attempt), Record: *rec}}, Verdict: rec.Verdict}
		res.Verdict = rec.Verdict
		return res, nil
	}
	if res.Qualification, err = r.Qualify(ctx, p, req.Attempts); err != nil {
		return nil, err
	}
	res.Verdict = res.Qualification.Verdict
	if !res.Qualification.Crowned || len(req.Incumbent) > 0 {
		return res, nil
	}
	ad, err := req.Arena.Digest()
	if err != nil {
		return nil, err
	}
	crown, err := CrownRecord(res.Qualification, CrownInput{Catalog: req.Targets, ArenaDigest: ad, Target: res.Target,
		Contributor: req.Contributor, BundleDir: scr.Dir(), ContentHash: res.ContentHash})
	if err != nil {
		return nil, err
	}
	if res.CrownDigest, err = product.Digest(&crown); err != nil {
		return nil, err
	}
	res.Crown = &crown
	return res, nil
}

// incumbentDigest names the incumbent: the genesis evaluation stack's
// digest for the stock stack, else the digest of its slot → content hash
// listing (staged, so an archive counts as what it holds).
func (r *Referee) incumbentDigest(ctx context.Context, req Request) (string, error) {
	ad, err := req.Arena.Digest()
	if err != nil {
		return "", err
	}
	if len(req.Incumbent) == 0 {
		g := product.Genesis(ad, req.Targets)
		return product.Digest(&g)
	}
	tmp, err := os.MkdirTemp(r.ScratchRoot, "cacheon-incumbent-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	listing := map[string]string{}
	for i, sp := range req.Incumbent {
		st, err := bundle.Stage(ctx, sp.Bundle, filepath.Join(tmp, strconv.Itoa(i)), r.Slots)
		if err != nil {
			return "", fault.CandidateErr(fmt.Errorf("incumbent slot %s: %w", sp.Slot, err))
		}
		listing[sp.Slot] = st.ContentHash
	}
	_, ref, err := evidence.Encode("cacheon.referee.incumbent", map[string]any{"arena": ad, "slots": listing})
	return ref.Digest, err
}
