package product

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

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
