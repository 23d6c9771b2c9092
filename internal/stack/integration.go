package stack

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Review decisions.
const (
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
)

// Outcomes of a review check or a test.
const (
	OutcomePass = "pass"
	OutcomeFail = "fail"
)

// DomainReview is the canon domain of a review written on its own.
const DomainReview = "cacheon.review"

// ReviewChecks are the ship questions a reviewer answers for a crown,
// each "pass" or "fail".
type ReviewChecks struct {
	// Reproduction against the crowned evaluation stack and the current
	// release context.
	Reproduction string `json:"reproduction"`
	// Correctness and maintained fallback behaviour.
	Correctness string `json:"correctness"`
	// Security review.
	Security string `json:"security"`
	// License and provenance approval.
	License string `json:"license"`
	// Compatibility with active contributions and the pinned runtime.
	Compatibility string `json:"compatibility"`
}

func (c ReviewChecks) each() []struct{ name, v string } {
	return []struct{ name, v string }{
		{"reproduction", c.Reproduction}, {"correctness", c.Correctness}, {"security", c.Security},
		{"license", c.License}, {"compatibility", c.Compatibility},
	}
}

// TestResult is one maintained test a reviewer ran.
type TestResult struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
}

// Review is a maintainer's review of a crown for integration. Humans write
// it (see ReadReview); it is embedded in the integration record.
type Review struct {
	Reviewer string       `json:"reviewer"`
	Decision string       `json:"decision"`
	Checks   ReviewChecks `json:"checks"`
	Tests    []TestResult `json:"tests"`
	// License is the SPDX expression of the integrated source.
	License string `json:"license"`
	// Provenance says where the integrated source came from.
	Provenance string `json:"provenance"`
	Notes      string `json:"notes,omitempty"`
}

// Domain implements Object.
func (*Review) Domain() string { return DomainReview }

// Validate implements Object. An approval needs every check and every
// test (at least one) to pass.
func (r *Review) Validate() error {
	if err := checkText("reviewer", r.Reviewer); err != nil {
		return err
	}
	if r.Decision != DecisionApproved && r.Decision != DecisionRejected {
		return fieldErr("decision", "%q is not %q or %q", r.Decision, DecisionApproved, DecisionRejected)
	}
	approved := r.Decision == DecisionApproved
	for _, c := range r.Checks.each() {
		if c.v != OutcomePass && c.v != OutcomeFail {
			return fieldErr("checks."+c.name, "%q is not %q or %q", c.v, OutcomePass, OutcomeFail)
		}
		if approved && c.v != OutcomePass {
			return fieldErr("checks."+c.name, "is %q, but the decision is %q", c.v, r.Decision)
		}
	}
	if r.Tests == nil {
		return fieldErr("tests", "must be a list, not null")
	}
	if approved && len(r.Tests) == 0 {
		return fieldErr("tests", "an approval lists the maintained tests that passed")
	}
	names := make([]string, len(r.Tests))
	for i, t := range r.Tests {
		f := fmt.Sprintf("tests[%d]", i)
		if err := checkText(f+".name", t.Name); err != nil {
			return err
		}
		if t.Outcome != OutcomePass && t.Outcome != OutcomeFail {
			return fieldErr(f+".outcome", "%q is not %q or %q", t.Outcome, OutcomePass, OutcomeFail)
		}
		if approved && t.Outcome != OutcomePass {
			return fieldErr(f+".outcome", "test %q is %q, but the decision is %q", t.Name, t.Outcome, r.Decision)
		}
		names[i] = t.Name
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fieldErr("tests", "test %q is listed twice", sorted[i])
		}
	}
	if err := checkText("license", r.License); err != nil {
		return err
	}
	if err := checkText("provenance", r.Provenance); err != nil {
		return err
	}
	return checkOptionalText("notes", r.Notes)
}

// ReadReview reads a review file a human wrote: formatting is free (with or
// without the envelope), but duplicate keys, floats, unknown and missing
// fields are rejected and every field is validated.
func ReadReview(data []byte) (Review, error) {
	r, _, err := DecodeLenient[Review](data)
	return r, err
}

// SourceRef names the reviewed source tree and where in it the selected
// payload lives.
type SourceRef struct {
	// Digest is the source tree digest (SourceDigest of its listing).
	Digest string `json:"digest"`
	// Prefix is the directory of the tree that holds the payload files;
	// empty means the tree root.
	Prefix string `json:"prefix"`
}

// PreservedFile is the proof for one selected payload file: where it lies
// in the reviewed source and the bytes it has there, equal to the crowned
// ones.
type PreservedFile struct {
	Path       string `json:"path"`
	SourcePath string `json:"source_path"`
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
}

// IntegrationRecord is the review of one crown: reviewed source still bound
// byte for byte to the crowned selected payload. It carries the crown
// record it names so it verifies on its own, offline.
type IntegrationRecord struct {
	// Crown is the crown record's digest (the crown ref).
	Crown       string      `json:"crown"`
	CrownRecord CrownRecord `json:"crown_record"`
	Source      SourceRef   `json:"source"`
	// Preserved lists every selected payload file, in payload order,
	// with its place in the reviewed source.
	Preserved []PreservedFile `json:"preserved"`
	Review    Review          `json:"review"`
}

// Domain implements Object.
func (*IntegrationRecord) Domain() string { return DomainIntegrationRecord }

// Validate implements Object.
func (r *IntegrationRecord) Validate() error {
	if err := checkDigest("crown", r.Crown); err != nil {
		return err
	}
	if err := within("crown_record", r.CrownRecord.Validate()); err != nil {
		return err
	}
	d, err := Digest(&r.CrownRecord)
	if err != nil {
		return fieldErr("crown_record", "%v", err)
	}
	if d != r.Crown {
		return fieldErr("crown", "%s does not name the carried crown record (its digest is %s)", r.Crown, d)
	}
	if err := checkDigest("source.digest", r.Source.Digest); err != nil {
		return err
	}
	if r.Source.Prefix != "" {
		if err := checkPathField("source.prefix", r.Source.Prefix); err != nil {
			return err
		}
	}
	want := PreservedFiles(r.CrownRecord.SelectedPayload, r.Source.Prefix)
	if len(r.Preserved) != len(want) {
		return fieldErr("preserved", "%d files, but the crowned selected payload has %d", len(r.Preserved), len(want))
	}
	for i, p := range r.Preserved {
		if p != want[i] {
			return fieldErr(fmt.Sprintf("preserved[%d]", i), "%+v is not the crowned file %+v", p, want[i])
		}
	}
	return within("review", r.Review.Validate())
}

// PreservedFiles maps a selected payload into a source tree at prefix.
func PreservedFiles(p SelectedPayload, prefix string) []PreservedFile {
	out := make([]PreservedFile, len(p.Files))
	for i, f := range p.Files {
		out[i] = PreservedFile{Path: f.Path, SourcePath: path.Join(prefix, f.Path), SHA256: f.SHA256, Size: f.Size}
	}
	return out
}

// PreserveError says how a source fails to preserve a selected payload:
// the first source path that differs, why, and how many more differ.
type PreserveError struct {
	SourcePath string
	Reason     string
	More       int
}

// Error names the file, the reason and the count of further files.
func (e *PreserveError) Error() string {
	s := e.SourcePath + ": " + e.Reason
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more files differ)", e.More)
	}
	return s
}

// CheckPreserved checks that the source listing preserves the selected
// payload at prefix byte for byte: every file there with identical SHA-256
// and size. Otherwise it returns a *PreserveError naming the first file
// that differs.
func CheckPreserved(p SelectedPayload, prefix string, source []FileEntry) error {
	var first *PreserveError
	n := 0
	for _, f := range PreservedFiles(p, prefix) {
		i, ok := slices.BinarySearchFunc(source, f.SourcePath, func(e FileEntry, s string) int {
			return strings.Compare(e.Path, s)
		})
		reason := ""
		switch {
		case !ok:
			reason = fmt.Sprintf("missing from the source (selected payload file %s)", f.Path)
		case source[i].SHA256 != f.SHA256:
			reason = fmt.Sprintf("sha256 %s is not the crowned %s", source[i].SHA256, f.SHA256)
		case source[i].Size != f.Size:
			reason = fmt.Sprintf("size %d is not the crowned %d", source[i].Size, f.Size)
		}
		if reason == "" {
			continue
		}
		if first == nil {
			first = &PreserveError{SourcePath: f.SourcePath, Reason: reason}
		}
		n++
	}
	if first == nil {
		return nil
	}
	first.More = n - 1
	return first
}

// Integrate is the integration transition: the review of crown over the
// reviewed source (its listing, recomputed from the files by the caller)
// with the payload under prefix. It refuses when the source does not
// preserve the crowned selected payload byte for byte. It changes no stack
// and no release; it only returns a new record.
func Integrate(crown CrownRecord, source []FileEntry, prefix string, review Review) (IntegrationRecord, error) {
	if err := crown.Validate(); err != nil {
		return IntegrationRecord{}, fmt.Errorf("integrate: crown: %w", err)
	}
	if err := CheckListing("source", source); err != nil {
		return IntegrationRecord{}, fmt.Errorf("integrate: %w", err)
	}
	if err := CheckPreserved(crown.SelectedPayload, prefix, source); err != nil {
		return IntegrationRecord{}, fmt.Errorf("integrate: the source does not preserve the crowned selected payload: %w", err)
	}
	cd, err := Digest(&crown)
	if err != nil {
		return IntegrationRecord{}, fmt.Errorf("integrate: %w", err)
	}
	sd, err := SourceDigest(source)
	if err != nil {
		return IntegrationRecord{}, fmt.Errorf("integrate: %w", err)
	}
	r := IntegrationRecord{
		Crown: cd, CrownRecord: crown,
		Source:    SourceRef{Digest: sd, Prefix: prefix},
		Preserved: PreservedFiles(crown.SelectedPayload, prefix),
		Review:    review,
	}
	if err := r.Validate(); err != nil {
		return IntegrationRecord{}, fmt.Errorf("integrate: %w", err)
	}
	return r, nil
}
