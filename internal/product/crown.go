package product

import (
	"fmt"
	"math/big"

	"cacheon/internal/canon"
)

// Attribution is the immutable credit of a contribution: who contributed it
// and the content hash of the proposal it came from.
type Attribution struct {
	// Contributor identifies the miner (for example a hotkey address).
	Contributor string `json:"contributor"`
	// Proposal is the content hash of the committed proposal bundle.
	Proposal string `json:"proposal"`
}

// Validate checks the attribution.
func (a Attribution) Validate() error {
	if err := checkText("contributor", a.Contributor); err != nil {
		return err
	}
	return checkDigest("proposal", a.Proposal)
}

// PayloadFile is one file of a selected payload: its path relative to the
// payload root, the SHA-256 of its bytes and its size.
type PayloadFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// SelectedPayload is the exact set of files a crown is bound to — the files
// of the selected delta — and the digest over that list.
type SelectedPayload struct {
	// Digest is canon.Digest("cacheon.selected_payload", 1, Files).
	Digest string `json:"digest"`
	// Files is sorted by path bytes, without duplicates.
	Files []PayloadFile `json:"files"`
}

// PayloadDigest returns the selected payload digest of files (which must be
// sorted by path).
func PayloadDigest(files []PayloadFile) (string, error) {
	if files == nil {
		files = []PayloadFile{}
	}
	return digestOf(DomainSelectedPayload, files)
}

// NewSelectedPayload sorts files and computes their digest.
func NewSelectedPayload(files []PayloadFile) (SelectedPayload, error) {
	fs := append([]PayloadFile(nil), files...)
	sortPayload(fs)
	p := SelectedPayload{Files: fs}
	d, err := PayloadDigest(fs)
	if err != nil {
		return SelectedPayload{}, fmt.Errorf("selected payload: %w", err)
	}
	p.Digest = d
	if err := p.Validate(); err != nil {
		return SelectedPayload{}, fmt.Errorf("selected payload: %w", err)
	}
	return p, nil
}

// Validate checks every file entry, the order and the digest.
func (p SelectedPayload) Validate() error {
	if len(p.Files) == 0 {
		return fieldErr("files", "a selected payload has at least one file")
	}
	keys := make([]string, len(p.Files))
	for i, f := range p.Files {
		field := fmt.Sprintf("files[%d]", i)
		if err := checkPathField(field+".path", f.Path); err != nil {
			return err
		}
		if err := checkSHA256(field+".sha256", f.SHA256); err != nil {
			return err
		}
		if f.Size < 0 {
			return fieldErr(field+".size", "%d is negative", f.Size)
		}
		keys[i] = f.Path
	}
	if err := checkSortedUnique("files", keys); err != nil {
		return err
	}
	if err := checkTreePrefixes("files", keys); err != nil {
		return err
	}
	if err := checkDigest("digest", p.Digest); err != nil {
		return err
	}
	want, err := PayloadDigest(p.Files)
	if err != nil {
		return fieldErr("digest", "%v", err)
	}
	if p.Digest != want {
		return fieldErr("digest", "%s does not match the listed files (they digest to %s)", p.Digest, want)
	}
	return nil
}

// CrownRecord is the settled crown a crown ref names: an independently
// reproduced marginal win of one registered target over one evaluation
// stack.
type CrownRecord struct {
	// Arena is the arena digest the crown was measured in.
	Arena string `json:"arena"`
	// Catalog is the target catalog digest in force.
	Catalog string `json:"catalog"`
	// Incumbent is the digest of the evaluation stack the candidate was
	// measured against.
	Incumbent string `json:"incumbent"`
	// Generation is the generation of the evaluation stack this crown
	// creates: the incumbent's generation + 1.
	Generation int64 `json:"generation"`
	// Target is the registered target and TargetSpec its specification
	// digest at the time of the crown.
	Target     string `json:"target"`
	TargetSpec string `json:"target_spec"`
	// Attribution credits the delta.
	Attribution Attribution `json:"attribution"`
	// SelectedPayload is the exact set of crowned files.
	SelectedPayload SelectedPayload `json:"selected_payload"`
	// Speedup is the crown speedup (the lower reproduced r), a canonical
	// decimal greater than 1.
	Speedup canon.Decimal `json:"speedup"`
	// Evidence lists the digests of the sealed evidence of the passing
	// attempts, sorted; at least two.
	Evidence []string `json:"evidence"`
}

// Domain implements Object.
func (*CrownRecord) Domain() string { return DomainCrown }

// Validate implements Object.
func (c *CrownRecord) Validate() error {
	for _, f := range []struct{ name, v string }{
		{"arena", c.Arena}, {"catalog", c.Catalog}, {"incumbent", c.Incumbent},
	} {
		if err := checkDigest(f.name, f.v); err != nil {
			return err
		}
	}
	if c.Generation < 1 {
		return fieldErr("generation", "%d: a crown creates generation 1 or later", c.Generation)
	}
	if err := checkText("target", c.Target); err != nil {
		return err
	}
	if err := checkDigest("target_spec", c.TargetSpec); err != nil {
		return err
	}
	if err := within("attribution", c.Attribution.Validate()); err != nil {
		return err
	}
	if err := within("selected_payload", c.SelectedPayload.Validate()); err != nil {
		return err
	}
	if err := checkSpeedup("speedup", c.Speedup); err != nil {
		return err
	}
	if len(c.Evidence) < 2 {
		return fieldErr("evidence", "%d evidence digests: a crown needs two independent passing attempts", len(c.Evidence))
	}
	for i, e := range c.Evidence {
		if err := checkDigest(fmt.Sprintf("evidence[%d]", i), e); err != nil {
			return err
		}
	}
	return checkSortedUnique("evidence", c.Evidence)
}

// checkSpeedup checks a canonical decimal strictly greater than 1.
func checkSpeedup(field string, s canon.Decimal) error {
	if err := checkDecimal(field, s); err != nil {
		return err
	}
	r, ok := new(big.Rat).SetString(string(s))
	if !ok || r.Cmp(big.NewRat(1, 1)) <= 0 {
		return fieldErr(field, "%s: a crown speedup is greater than 1", s)
	}
	return nil
}
