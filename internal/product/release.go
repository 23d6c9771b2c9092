package product

import (
	"fmt"
	"slices"
	"sort"
)

// DomainReleaseBase is the canon domain of the human-written release base.
const DomainReleaseBase = "cacheon.release_base"

// NativeIdentity is the exact native build identity of a release: target
// platform, toolchain and the digest of the native build inputs.
type NativeIdentity struct {
	Platform  string `json:"platform"`
	Toolchain string `json:"toolchain"`
	Digest    string `json:"digest"`
}

// Validate checks the identity.
func (n NativeIdentity) Validate() error {
	if err := checkText("platform", n.Platform); err != nil {
		return err
	}
	if err := checkText("toolchain", n.Toolchain); err != nil {
		return err
	}
	return checkDigest("digest", n.Digest)
}

// PolicyIdentity is the policy a release was assembled under: the target
// catalog digest and the reference manifest that is its semantic authority.
type PolicyIdentity struct {
	Catalog   string `json:"catalog"`
	Reference string `json:"reference"`
}

// ReleaseSource is one reviewed source tree of a release, materialized in
// the engine tree under sources/NAME/.
type ReleaseSource struct {
	Name       string `json:"name"`
	Digest     string `json:"digest"`
	Provenance string `json:"provenance"`
}

// Contribution is one integrated contribution of a release. Every field is
// copied from the one integration record that covers it, named by
// Integration.
type Contribution struct {
	Target          string      `json:"target"`
	TargetSpec      string      `json:"target_spec"`
	Crown           string      `json:"crown"`
	Integration     string      `json:"integration"`
	Attribution     Attribution `json:"attribution"`
	SelectedPayload string      `json:"selected_payload"`
	// Source names the release source holding the payload, under Prefix.
	Source string `json:"source"`
	Prefix string `json:"prefix"`
}

// ReleaseManifest is the product state: the pinned runtime, the model, the
// native and policy identities, the reviewed sources, and the integrated
// contributions only — each covered by exactly one integration record.
// A new release is always a new manifest; an existing one never changes.
type ReleaseManifest struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Previous is the digest of the release manifest this one succeeds.
	Previous      string          `json:"previous,omitempty"`
	Runtime       RuntimePin      `json:"runtime"`
	Model         ModelIdentity   `json:"model"`
	Native        NativeIdentity  `json:"native"`
	Policy        PolicyIdentity  `json:"policy"`
	Sources       []ReleaseSource `json:"sources"`
	Contributions []Contribution  `json:"contributions"`
}

// Domain implements Object.
func (*ReleaseManifest) Domain() string { return DomainReleaseManifest }

// Validate implements Object.
func (m *ReleaseManifest) Validate() error {
	if err := checkName("name", m.Name); err != nil {
		return err
	}
	if err := checkText("version", m.Version); err != nil {
		return err
	}
	if m.Previous != "" {
		if err := checkDigest("previous", m.Previous); err != nil {
			return err
		}
	}
	if err := within("runtime", m.Runtime.Validate()); err != nil {
		return err
	}
	if err := within("model", m.Model.Validate()); err != nil {
		return err
	}
	if err := within("native", m.Native.Validate()); err != nil {
		return err
	}
	if err := checkDigest("policy.catalog", m.Policy.Catalog); err != nil {
		return err
	}
	if err := checkDigest("policy.reference", m.Policy.Reference); err != nil {
		return err
	}
	if len(m.Sources) == 0 {
		return fieldErr("sources", "a release has at least one source tree")
	}
	names := make([]string, len(m.Sources))
	for i, s := range m.Sources {
		f := fmt.Sprintf("sources[%d]", i)
		if err := checkName(f+".name", s.Name); err != nil {
			return err
		}
		if err := checkDigest(f+".digest", s.Digest); err != nil {
			return err
		}
		if err := checkText(f+".provenance", s.Provenance); err != nil {
			return err
		}
		names[i] = s.Name
	}
	if err := checkSortedUnique("sources", names); err != nil {
		return err
	}
	if m.Contributions == nil {
		return fieldErr("contributions", "must be a list, not null")
	}
	targets := make([]string, len(m.Contributions))
	seen := map[string]string{}
	for i, c := range m.Contributions {
		f := fmt.Sprintf("contributions[%d]", i)
		if err := within(f, c.validate(names)); err != nil {
			return err
		}
		for _, d := range []struct{ field, v string }{{"crown", c.Crown}, {"integration", c.Integration}} {
			if prev, dup := seen[d.v]; dup {
				return fieldErr(f+"."+d.field, "%s is already named by %s", d.v, prev)
			}
			seen[d.v] = f + "." + d.field
		}
		targets[i] = c.Target
	}
	return checkSortedUnique("contributions", targets)
}

func (c Contribution) validate(sources []string) error {
	if err := checkText("target", c.Target); err != nil {
		return err
	}
	for _, d := range []struct{ field, v string }{
		{"target_spec", c.TargetSpec}, {"crown", c.Crown}, {"integration", c.Integration}, {"selected_payload", c.SelectedPayload},
	} {
		if err := checkDigest(d.field, d.v); err != nil {
			return err
		}
	}
	if err := within("attribution", c.Attribution.Validate()); err != nil {
		return err
	}
	if !slices.Contains(sources, c.Source) {
		return fieldErr("source", "%q is not one of the release sources %v", c.Source, sources)
	}
	if c.Prefix != "" {
		return checkPathField("prefix", c.Prefix)
	}
	return nil
}

// SourceByName returns the release source called name.
func (m *ReleaseManifest) SourceByName(name string) (ReleaseSource, bool) {
	i := slices.IndexFunc(m.Sources, func(s ReleaseSource) bool { return s.Name == name })
	if i < 0 {
		return ReleaseSource{}, false
	}
	return m.Sources[i], true
}

// CheckCoverage checks that every contribution is covered by exactly one
// integration record (records maps record digest to record) and that no
// record is left over: the record named by the contribution must exist,
// carry an approved review, and agree with the contribution on crown,
// target, specification, attribution, selected payload and reviewed source.
func (m *ReleaseManifest) CheckCoverage(records map[string]IntegrationRecord) error {
	used := map[string]bool{}
	for i, c := range m.Contributions {
		f := fmt.Sprintf("contributions[%d]", i)
		r, ok := records[c.Integration]
		if !ok {
			return fieldErr(f+".integration", "no integration record %s covers %s", c.Integration, c.Target)
		}
		used[c.Integration] = true
		src, _ := m.SourceByName(c.Source)
		cr := r.CrownRecord
		for _, chk := range []struct {
			field     string
			got, want any
		}{
			{"crown", c.Crown, r.Crown},
			{"target", c.Target, cr.Target},
			{"target_spec", c.TargetSpec, cr.TargetSpec},
			{"attribution", c.Attribution, cr.Attribution},
			{"selected_payload", c.SelectedPayload, cr.SelectedPayload.Digest},
			{"source", src.Digest, r.Source.Digest},
			{"prefix", c.Prefix, r.Source.Prefix},
		} {
			if chk.got != chk.want {
				return fieldErr(f+"."+chk.field, "%v does not match integration record %s (%v)", chk.got, c.Integration, chk.want)
			}
		}
		if r.Review.Decision != DecisionApproved {
			return fieldErr(f+".integration", "record %s has review decision %q, not %q", c.Integration, r.Review.Decision, DecisionApproved)
		}
	}
	extra := []string{}
	for d := range records {
		if !used[d] {
			extra = append(extra, d)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fieldErr("contributions", "integration record %s covers no contribution of the release", extra[0])
	}
	return nil
}

// BaseSource names a source tree in a release base; its digest is computed
// from the tree when the release manifest is made.
type BaseSource struct {
	Name       string `json:"name"`
	Provenance string `json:"provenance"`
}

// ReleaseBase is what a maintainer writes to start a release: everything
// but the computed digests and the contributions.
type ReleaseBase struct {
	Name     string         `json:"name"`
	Version  string         `json:"version"`
	Previous string         `json:"previous,omitempty"`
	Runtime  RuntimePin     `json:"runtime"`
	Model    ModelIdentity  `json:"model"`
	Native   NativeIdentity `json:"native"`
	// Reference is the digest of the reference manifest.
	Reference string       `json:"reference"`
	Sources   []BaseSource `json:"sources"`
}

// Domain implements Object.
func (*ReleaseBase) Domain() string { return DomainReleaseBase }

// Validate implements Object.
func (b *ReleaseBase) Validate() error {
	if err := checkDigest("reference", b.Reference); err != nil {
		return err
	}
	// The rest is checked as the manifest it becomes, with the reference
	// digest standing in for the digests computed later.
	m := b.manifest(nil)
	for i := range m.Sources {
		m.Sources[i].Digest = b.Reference // a placeholder valid digest
	}
	m.Policy.Catalog = b.Reference
	return m.Validate()
}

func (b *ReleaseBase) manifest(digests map[string]string) ReleaseManifest {
	m := ReleaseManifest{
		Name: b.Name, Version: b.Version, Previous: b.Previous,
		Runtime: b.Runtime, Model: b.Model, Native: b.Native,
		Policy:        PolicyIdentity{Reference: b.Reference},
		Contributions: []Contribution{},
	}
	for _, s := range b.Sources {
		m.Sources = append(m.Sources, ReleaseSource{Name: s.Name, Digest: digests[s.Name], Provenance: s.Provenance})
	}
	return m
}

// ReadReleaseBase reads a release base a human wrote (lenient formatting,
// strict fields).
func ReadReleaseBase(data []byte) (ReleaseBase, error) {
	b, _, err := DecodeLenient[ReleaseBase](data)
	return b, err
}

// NewRelease assembles a new release manifest from a base, the digests of
// its source trees (by source name) and the integration records of the
// contributions to ship. Every record must carry an approved review, name a
// registered target with the catalog's specification digest, and have
// reviewed exactly one of the release's source trees; no two records may
// cover one crown or one target, and the targets must be able to be active
// together. The result is a new object (it names its predecessor in
// previous, if any); inputs are not modified.
func NewRelease(cat Catalog, base ReleaseBase, sourceDigests map[string]string, records []IntegrationRecord) (ReleaseManifest, error) {
	if err := base.Validate(); err != nil {
		return ReleaseManifest{}, fmt.Errorf("new release: base: %w", err)
	}
	for _, s := range base.Sources {
		if _, ok := sourceDigests[s.Name]; !ok {
			return ReleaseManifest{}, fmt.Errorf("new release: source %q: no tree given", s.Name)
		}
	}
	if len(sourceDigests) != len(base.Sources) {
		return ReleaseManifest{}, fmt.Errorf("new release: %d source trees given for %d sources", len(sourceDigests), len(base.Sources))
	}
	m := base.manifest(sourceDigests)
	m.Policy.Catalog = cat.Digest()
	byDigest := map[string]IntegrationRecord{}
	var active []string
	for i, r := range records {
		f := fmt.Sprintf("integration record %d", i+1)
		if err := r.Validate(); err != nil {
			return ReleaseManifest{}, fmt.Errorf("new release: %s: %w", f, err)
		}
		d, err := Digest(&r)
		if err != nil {
			return ReleaseManifest{}, fmt.Errorf("new release: %s: %w", f, err)
		}
		f = fmt.Sprintf("%s (%s)", f, d)
		if r.Review.Decision != DecisionApproved {
			return ReleaseManifest{}, fmt.Errorf("new release: %s: review.decision: %q; only approved integrations ship", f, r.Review.Decision)
		}
		cr := r.CrownRecord
		spec, ok := cat.TargetSpec(cr.Target)
		if !ok {
			return ReleaseManifest{}, fmt.Errorf("new release: %s: crown_record.target: %q is not a registered target", f, cr.Target)
		}
		if spec != cr.TargetSpec {
			return ReleaseManifest{}, fmt.Errorf("new release: %s: crown_record.target_spec: %s is not %s's specification digest %s", f, cr.TargetSpec, cr.Target, spec)
		}
		var src []string
		for _, s := range m.Sources {
			if s.Digest == r.Source.Digest {
				src = append(src, s.Name)
			}
		}
		if len(src) != 1 {
			return ReleaseManifest{}, fmt.Errorf("new release: %s: source.digest: %s matches %d release source trees %v, want exactly one", f, r.Source.Digest, len(src), src)
		}
		for _, c := range m.Contributions {
			if c.Crown == r.Crown {
				return ReleaseManifest{}, fmt.Errorf("new release: %s: crown %s is already covered by integration record %s", f, r.Crown, c.Integration)
			}
			if c.Target == cr.Target {
				return ReleaseManifest{}, fmt.Errorf("new release: %s: target %s is already held by integration record %s", f, cr.Target, c.Integration)
			}
		}
		next, displaced, err := cat.Activate(active, cr.Target)
		if err != nil {
			return ReleaseManifest{}, fmt.Errorf("new release: %s: %w", f, err)
		}
		if len(displaced) > 0 {
			return ReleaseManifest{}, fmt.Errorf("new release: %s: %s displaces %v, also in the release", f, cr.Target, displaced)
		}
		active = next
		byDigest[d] = r
		m.Contributions = append(m.Contributions, Contribution{
			Target: cr.Target, TargetSpec: cr.TargetSpec, Crown: r.Crown, Integration: d,
			Attribution: cr.Attribution, SelectedPayload: cr.SelectedPayload.Digest,
			Source: src[0], Prefix: r.Source.Prefix,
		})
	}
	sort.Slice(m.Contributions, func(i, j int) bool { return m.Contributions[i].Target < m.Contributions[j].Target })
	if err := m.Validate(); err != nil {
		return ReleaseManifest{}, fmt.Errorf("new release: %w", err)
	}
	if err := m.CheckCoverage(byDigest); err != nil {
		return ReleaseManifest{}, fmt.Errorf("new release: %w", err)
	}
	return m, nil
}
