package release

import (
	"fmt"
	"sort"

	"cacheon/internal/canon"
	"cacheon/internal/product"
)

// DomainSBOM is the canon domain of a release SBOM.
const DomainSBOM = "cacheon.sbom"

// Component kinds listed in an SBOM.
const (
	KindRuntime      = "runtime"
	KindModel        = "model"
	KindNative       = "native"
	KindSource       = "source"
	KindContribution = "contribution"
)

// Component is one component of a release with its digest and provenance.
type Component struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	Digest     string `json:"digest"`
	Provenance string `json:"provenance"`
}

// SBOM lists every component of a release. It is derived from the release
// manifest and its integration records alone, so verification re-derives it
// and compares.
type SBOM struct {
	// Release is the release manifest digest.
	Release    string      `json:"release"`
	Name       string      `json:"name"`
	Version    string      `json:"version"`
	Components []Component `json:"components"`
}

// Domain implements product.Object.
func (*SBOM) Domain() string { return DomainSBOM }

// Validate implements product.Object.
func (s *SBOM) Validate() error {
	if err := canon.ValidDigest(s.Release); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if s.Name == "" || s.Version == "" {
		return fmt.Errorf("name: release name and version must not be empty")
	}
	if len(s.Components) == 0 {
		return fmt.Errorf("components: must not be empty")
	}
	for i, c := range s.Components {
		if c.Kind == "" || c.Name == "" {
			return fmt.Errorf("components[%d]: kind and name must not be empty", i)
		}
		if err := canon.ValidDigest(c.Digest); err != nil {
			return fmt.Errorf("components[%d].digest: %w", i, err)
		}
		if c.Provenance == "" {
			return fmt.Errorf("components[%d].provenance: must not be empty", i)
		}
		if i > 0 && !componentLess(s.Components[i-1], c) {
			return fmt.Errorf("components[%d]: out of order or duplicate (sorted by kind, then name)", i)
		}
	}
	return nil
}

func componentLess(a, b Component) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.Name < b.Name
}

// NewSBOM derives the SBOM of a release from its manifest and the
// integration records (by digest) that cover its contributions.
func NewSBOM(m *product.ReleaseManifest, records map[string]product.IntegrationRecord) (SBOM, error) {
	md, err := product.Digest(m)
	if err != nil {
		return SBOM{}, fmt.Errorf("sbom: %w", err)
	}
	if err := m.CheckCoverage(records); err != nil {
		return SBOM{}, fmt.Errorf("sbom: %w", err)
	}
	cs := []Component{
		{Kind: KindRuntime, Name: m.Runtime.Name, Version: m.Runtime.Version, Digest: m.Runtime.Digest,
			Provenance: "pinned runtime source " + m.Runtime.Name + " " + m.Runtime.Version},
		{Kind: KindModel, Name: m.Model.Name, Version: m.Model.Revision, Digest: m.Model.Digest,
			Provenance: "sealed model weight tree " + m.Model.Name + "@" + m.Model.Revision},
		{Kind: KindNative, Name: m.Native.Platform, Version: m.Native.Toolchain, Digest: m.Native.Digest,
			Provenance: "native build inputs for " + m.Native.Platform + " with " + m.Native.Toolchain},
	}
	for _, s := range m.Sources {
		cs = append(cs, Component{Kind: KindSource, Name: s.Name, Version: "", Digest: s.Digest,
			Provenance: "reviewed source tree sources/" + s.Name + ": " + s.Provenance})
	}
	for _, c := range m.Contributions {
		r := records[c.Integration]
		cs = append(cs, Component{
			Kind: KindContribution, Name: c.Target, Version: c.TargetSpec, Digest: c.SelectedPayload,
			Provenance: fmt.Sprintf("crown %s (speedup %s, contributor %s, proposal %s); integration %s reviewed by %s, license %s; selected payload in sources/%s/%s; %s",
				c.Crown, r.CrownRecord.Speedup, c.Attribution.Contributor, c.Attribution.Proposal,
				c.Integration, r.Review.Reviewer, r.Review.License, c.Source, c.Prefix, r.Review.Provenance),
		})
	}
	sort.SliceStable(cs, func(i, j int) bool { return componentLess(cs[i], cs[j]) })
	s := SBOM{Release: md, Name: m.Name, Version: m.Version, Components: cs}
	if err := s.Validate(); err != nil {
		return SBOM{}, fmt.Errorf("sbom: %w", err)
	}
	return s, nil
}
