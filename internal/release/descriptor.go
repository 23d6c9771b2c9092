package release

import (
	"fmt"

	"cacheon/internal/canon"
)

// DomainDescriptor is the canon domain of a release descriptor.
const DomainDescriptor = "cacheon.release_descriptor"

// TarRef is the exact engine tar: SHA-256 of its bytes and its size.
type TarRef struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Descriptor binds everything a release consists of. Its digest is what a
// release signature covers: the DSSE payload is exactly the descriptor's
// canonical bytes, whose SHA-256 is that digest.
type Descriptor struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Release is the release manifest digest (tree/release.json).
	Release string `json:"release"`
	// Tree is the tree digest (the digest of tree.json).
	Tree string `json:"tree"`
	// Tar is the engine tar.
	Tar TarRef `json:"tar"`
	// SBOM is the SBOM digest (sbom.json).
	SBOM string `json:"sbom"`
}

// Domain implements product.Object.
func (*Descriptor) Domain() string { return DomainDescriptor }

// Validate implements product.Object.
func (d *Descriptor) Validate() error {
	if d.Name == "" || d.Version == "" {
		return fmt.Errorf("name: release name and version must not be empty")
	}
	for _, f := range []struct{ name, v string }{{"release", d.Release}, {"tree", d.Tree}, {"tar.sha256", d.Tar.SHA256}, {"sbom", d.SBOM}} {
		if err := canon.ValidDigest(f.v); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if d.Tar.Size <= 0 {
		return fmt.Errorf("tar.size: %d is not positive", d.Tar.Size)
	}
	return nil
}
