package product

import (
	"cacheon/internal/tensor"
	"fmt"
)

// ReferenceManifest is the pristine semantic authority of an arena: the
// stock runtime and the model with no contributions at all. The type has no
// place for a contribution, so a reference manifest that names one does not
// decode (unknown field).
type ReferenceManifest struct {
	// Arena is the digest of the arena this reference serves.
	Arena   string        `json:"arena"`
	Runtime RuntimePin    `json:"runtime"`
	Model   ModelIdentity `json:"model"`
	DType   string        `json:"dtype"`
}

// Domain implements Object.
func (*ReferenceManifest) Domain() string { return DomainReference }

// Validate implements Object.
func (r *ReferenceManifest) Validate() error {
	if err := checkDigest("arena", r.Arena); err != nil {
		return err
	}
	if err := within("runtime", r.Runtime.Validate()); err != nil {
		return err
	}
	if err := within("model", r.Model.Validate()); err != nil {
		return err
	}
	if _, err := tensor.ParseComputeDType(r.DType); err != nil {
		return fieldErr("dtype", "%v", err)
	}
	return nil
}

// NewReference derives the reference manifest of an arena: its runtime,
// model and dtype, nothing else.
func NewReference(a Arena) (ReferenceManifest, error) {
	d, err := Digest(&a)
	if err != nil {
		return ReferenceManifest{}, fmt.Errorf("reference manifest: %w", err)
	}
	return ReferenceManifest{Arena: d, Runtime: a.Runtime, Model: a.Model, DType: a.DType}, nil
}
