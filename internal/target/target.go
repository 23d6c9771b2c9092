// Package target is the reward-unit policy: the catalog of registered
// targets that a contribution can be attributed to.
//
// A slot is a semantic ABI; a target is an economic identity. Every slot
// has a singleton target of the same name; an atomic target spans several
// slots whose delta only makes sense together, and displaces the singleton
// targets of its members while active. The catalog also records which
// targets may be active together (compatibility) and, where two compatible
// targets can both apply to one call site, which one applies first
// (precedence). Packaging order never decides overlap or ownership.
//
// Each target's specification — members with their frozen slot contract
// digests, allowed features, displacement, compatibility and precedence —
// is hashed into a target specification digest, and all of them into the
// catalog digest.
package target

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"cacheon/internal/canon"
	"cacheon/internal/slot"
)

// Kind is a target's shape.
type Kind string

// Target kinds.
const (
	Singleton Kind = "singleton"
	Atomic    Kind = "atomic"
)

// Features is the closed vocabulary of contribution features a target may
// admit. FeatureSetup is part of the vocabulary only so that it can be named
// and refused: no registered target ever allows it.
const (
	FeaturePrepare      = "prepare"       // a prepare callable (layout/quant repacking)
	FeatureVariants     = "variants"      // several variants over disjoint capability domains
	FeatureCapabilities = "capabilities"  // capability predicates in metadata
	FeatureTriton       = "triton"        // Triton kernels
	FeatureCUDASources  = "cuda_sources"  // declared .cu/.cuh sources compiled by the validator
	FeatureProcessGroup = "process_group" // receives the collective's process group
	FeatureGraphSafe    = "graph_safe"    // declares CUDA-graph-safe behaviour
	FeatureSetup        = "setup"         // engine-wide setup hook: never allowed
)

// Vocabulary returns every known feature name, sorted.
func Vocabulary() []string {
	v := []string{FeaturePrepare, FeatureVariants, FeatureCapabilities, FeatureTriton,
		FeatureCUDASources, FeatureProcessGroup, FeatureGraphSafe, FeatureSetup}
	sort.Strings(v)
	return v
}

// Target is one registered reward unit.
type Target struct {
	Name     string   `json:"name"`
	Kind     Kind     `json:"kind"`
	Members  []string `json:"members"`  // slot names, sorted
	Features []string `json:"features"` // allowed features, sorted
	// Displaces lists targets that cannot be active while this one is.
	Displaces []string `json:"displaces"`
	// Compatible lists targets whose members overlap this one's call sites
	// but which may be active at the same time (symmetric).
	Compatible []string `json:"compatible"`
	// Precedence, when non-empty, is the first-applicable order among this
	// target and its compatible targets at a shared call site.
	Precedence []string `json:"precedence"`
	// MemberContracts maps each member slot to its contract digest.
	MemberContracts map[string]string `json:"member_contracts"`
	// Description is one line for humans.
	Description string `json:"description"`

	specDigest string
}

// SpecDigest is the target specification digest.
func (t *Target) SpecDigest() string { return t.specDigest }

// Catalog is the validated set of targets.
type Catalog struct {
	slots   *slot.Catalog
	targets map[string]*Target
	order   []string
	digest  string
}

// Domains of the identities computed here.
const (
	SpecDomain    = "cacheon.target_spec"
	CatalogDomain = "cacheon.target_catalog"
)

// MoEEpilogue is the registered atomic target over the two MoE epilogue
// collectives.
const MoEEpilogue = "collective.moe_epilogue.v1"

// NewCatalog builds the registered targets over the slot catalog: one
// singleton per slot plus collective.moe_epilogue.v1.
func NewCatalog(slots *slot.Catalog) (*Catalog, error) {
	var ts []*Target
	for _, s := range slots.Specs() {
		t := &Target{
			Name: s.Name, Kind: Singleton, Members: []string{s.Name},
			Description: "singleton target of slot " + s.Name,
			Features:    []string{FeatureCapabilities, FeatureGraphSafe, FeatureTriton, FeatureVariants},
		}
		if s.Prepare != "" {
			t.Features = append(t.Features, FeaturePrepare)
		}
		if s.Kind == slot.Collective {
			t.Features = append(t.Features, FeatureProcessGroup)
		}
		if s.Kind != slot.Op {
			t.Features = append(t.Features, FeatureCUDASources)
		}
		ts = append(ts, t)
	}
	ts = append(ts, &Target{
		Name: MoEEpilogue, Kind: Atomic,
		Members:     []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"},
		Description: "atomic MoE epilogue: fused finalize/all-reduce/residual/RMSNorm at both seams, one delta",
		Features:    []string{FeatureCapabilities, FeatureCUDASources, FeatureGraphSafe, FeatureProcessGroup, FeatureTriton, FeatureVariants},
		Displaces:   []string{"collective.ar_residual_rmsnorm", "collective.moe_finalize_ar_rmsnorm"},
	})
	// moe.fused_experts_reduce and moe.fused_experts serve the same MoE
	// call site; both may be active, and the reduce form applies first
	// wherever it is applicable (tensor-parallel with an owned reduce).
	byName := map[string]*Target{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	red, moe := byName["moe.fused_experts_reduce"], byName["moe.fused_experts"]
	if red == nil || moe == nil {
		return nil, fmt.Errorf("target catalog: slot catalog lacks the MoE slots")
	}
	red.Compatible = []string{moe.Name}
	moe.Compatible = []string{red.Name}
	prec := []string{red.Name, moe.Name}
	red.Precedence, moe.Precedence = prec, prec
	return newCatalog(slots, ts)
}

func newCatalog(slots *slot.Catalog, ts []*Target) (*Catalog, error) {
	c := &Catalog{slots: slots, targets: map[string]*Target{}}
	for _, t := range ts {
		if _, dup := c.targets[t.Name]; dup {
			return nil, fmt.Errorf("target catalog: %s registered twice", t.Name)
		}
		c.targets[t.Name] = t
		c.order = append(c.order, t.Name)
	}
	sort.Strings(c.order)
	for _, name := range c.order {
		if err := c.check(c.targets[name]); err != nil {
			return nil, fmt.Errorf("target catalog: %s: %w", name, err)
		}
	}
	if err := c.checkCycles(); err != nil {
		return nil, fmt.Errorf("target catalog: %w", err)
	}
	digests := map[string]string{}
	for _, name := range c.order {
		t := c.targets[name]
		d, err := canon.Digest(SpecDomain, 1, t)
		if err != nil {
			return nil, fmt.Errorf("target catalog: %s: %w", name, err)
		}
		t.specDigest = d
		digests[name] = d
	}
	d, err := canon.Digest(CatalogDomain, 1, digests)
	if err != nil {
		return nil, fmt.Errorf("target catalog: digest: %w", err)
	}
	c.digest = d
	return c, nil
}

// check validates one target and fills its member contract digests.
func (c *Catalog) check(t *Target) error {
	for _, l := range [][]string{t.Members, t.Features, t.Displaces, t.Compatible} {
		sort.Strings(l)
	}
	if len(t.Members) == 0 {
		return fmt.Errorf("no members")
	}
	for _, m := range t.Members {
		if _, ok := c.slots.Lookup(m); !ok {
			return fmt.Errorf("member %s is not a registered slot", m)
		}
	}
	switch t.Kind {
	case Singleton:
		if len(t.Members) != 1 || t.Members[0] != t.Name {
			return fmt.Errorf("a singleton target's one member must be the slot of the same name")
		}
	case Atomic:
		if len(t.Members) < 2 {
			return fmt.Errorf("an atomic target needs at least two members")
		}
		for _, m := range t.Members {
			if !slices.Contains(t.Displaces, m) {
				return fmt.Errorf("atomic target does not displace the singleton target of its member %s", m)
			}
		}
	default:
		return fmt.Errorf("unknown kind %q", t.Kind)
	}
	t.MemberContracts = map[string]string{}
	for _, m := range t.Members {
		s, ok := c.slots.Lookup(m)
		if !ok {
			return fmt.Errorf("member %s is not a registered slot", m)
		}
		d, err := s.ContractDigest()
		if err != nil {
			return err
		}
		t.MemberContracts[m] = d
	}
	vocab := Vocabulary()
	for _, f := range t.Features {
		if !slices.Contains(vocab, f) {
			return fmt.Errorf("feature %q is not in the vocabulary %v", f, vocab)
		}
		if f == FeatureSetup {
			return fmt.Errorf("feature %q is never allowed", f)
		}
	}
	for _, d := range t.Displaces {
		if d == t.Name {
			return fmt.Errorf("displaces itself")
		}
		if _, ok := c.targets[d]; !ok {
			return fmt.Errorf("displaces unregistered target %s", d)
		}
	}
	for _, o := range t.Compatible {
		other, ok := c.targets[o]
		if !ok {
			return fmt.Errorf("compatible with unregistered target %s", o)
		}
		if !slices.Contains(other.Compatible, t.Name) {
			return fmt.Errorf("compatibility with %s is not symmetric", o)
		}
		if slices.Contains(t.Displaces, o) {
			return fmt.Errorf("both compatible with and displacing %s", o)
		}
	}
	if len(t.Precedence) > 0 {
		if !slices.Contains(t.Precedence, t.Name) {
			return fmt.Errorf("precedence %v does not name the target itself", t.Precedence)
		}
		for _, p := range t.Precedence {
			if p != t.Name && !slices.Contains(t.Compatible, p) {
				return fmt.Errorf("precedence names %s, which is not compatible", p)
			}
			if other := c.targets[p]; other != nil && !slices.Equal(other.Precedence, t.Precedence) {
				return fmt.Errorf("precedence disagrees with %s's", p)
			}
		}
	}
	return nil
}

// checkCycles rejects displacement cycles (A displaces B … displaces A).
func (c *Catalog) checkCycles() error {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var visit func(n string, path []string) error
	visit = func(n string, path []string) error {
		switch color[n] {
		case grey:
			return fmt.Errorf("displacement cycle: %s", strings.Join(append(path, n), " -> "))
		case black:
			return nil
		}
		color[n] = grey
		for _, d := range c.targets[n].Displaces {
			if err := visit(d, append(path, n)); err != nil {
				return err
			}
		}
		color[n] = black
		return nil
	}
	for _, n := range c.order {
		if err := visit(n, nil); err != nil {
			return err
		}
	}
	return nil
}

// Digest is the catalog digest.
func (c *Catalog) Digest() string { return c.digest }

// Lookup returns a registered target.
func (c *Catalog) Lookup(name string) (*Target, bool) {
	t, ok := c.targets[name]
	return t, ok
}

// TargetSpec returns the specification digest of the registered target
// name. With Digest, Displaces and Activate it is what the product side
// asks of the catalog (product.Catalog), in plain values.
func (c *Catalog) TargetSpec(name string) (string, bool) {
	t, ok := c.targets[name]
	if !ok {
		return "", false
	}
	return t.specDigest, true
}

// Displaces returns the targets that the registered target name displaces
// while it is active (none when name is not registered).
func (c *Catalog) Displaces(name string) []string {
	t, ok := c.targets[name]
	if !ok {
		return nil
	}
	return slices.Clone(t.Displaces)
}

// Targets returns every target sorted by name.
func (c *Catalog) Targets() []*Target {
	out := make([]*Target, 0, len(c.order))
	for _, n := range c.order {
		out = append(out, c.targets[n])
	}
	return out
}

// Slots returns the slot catalog the targets are built over.
func (c *Catalog) Slots() *slot.Catalog { return c.slots }
