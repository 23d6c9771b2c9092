package product

import (
	"fmt"
	"slices"
)

// StackEntry is one active target of a stack and the contribution that
// holds it.
type StackEntry struct {
	Target     string `json:"target"`
	TargetSpec string `json:"target_spec"`
	// Proposal is the content hash of the proposal that supplies the
	// code. It may be hostile: stacks are for isolated evaluation only.
	Proposal string `json:"proposal"`
	// Crown is the digest of the crown record that put the entry there.
	// Only the transitioning entry of a candidate stack has none.
	Crown string `json:"crown,omitempty"`
}

func (e StackEntry) validate(needCrown bool) error {
	if err := checkText("target", e.Target); err != nil {
		return err
	}
	if err := checkDigest("target_spec", e.TargetSpec); err != nil {
		return err
	}
	if err := checkDigest("proposal", e.Proposal); err != nil {
		return err
	}
	if e.Crown == "" && !needCrown {
		return nil
	}
	return checkDigest("crown", e.Crown)
}

// EvaluationStack is the economic hill-climb state of an arena: which
// contribution holds each active target. It may name hostile proposals and
// is valid only inside isolated evaluation; it never enters a release.
type EvaluationStack struct {
	Arena      string       `json:"arena"`
	Catalog    string       `json:"catalog"`
	Generation int64        `json:"generation"`
	Entries    []StackEntry `json:"entries"`
}

// Domain implements Object.
func (*EvaluationStack) Domain() string { return DomainEvaluationStack }

// Validate implements Object.
func (s *EvaluationStack) Validate() error {
	if err := checkDigest("arena", s.Arena); err != nil {
		return err
	}
	if err := checkDigest("catalog", s.Catalog); err != nil {
		return err
	}
	if s.Generation < 0 {
		return fieldErr("generation", "%d is negative", s.Generation)
	}
	if int64(len(s.Entries)) > s.Generation {
		return fieldErr("entries", "%d entries at generation %d: each generation adds at most one", len(s.Entries), s.Generation)
	}
	return checkEntries("entries", s.Entries, "")
}

func checkEntries(field string, entries []StackEntry, uncrowned string) error {
	if entries == nil {
		return fieldErr(field, "must be a list, not null")
	}
	keys := make([]string, len(entries))
	for i, e := range entries {
		if err := within(fmt.Sprintf("%s[%d]", field, i), e.validate(e.Target != uncrowned)); err != nil {
			return err
		}
		keys[i] = e.Target
	}
	return checkSortedUnique(field, keys)
}

// Active returns the active target names, sorted.
func (s *EvaluationStack) Active() []string { return targetsOf(s.Entries) }

func targetsOf(entries []StackEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Target
	}
	return out
}

// Genesis is the generation-0 evaluation stack of an arena: stock
// everywhere.
func Genesis(arena string, cat Catalog) EvaluationStack {
	return EvaluationStack{Arena: arena, Catalog: cat.Digest(), Generation: 0, Entries: []StackEntry{}}
}

// CheckStack checks a stack's entries against the catalog: it must be the
// catalog the stack was made under, every target registered with the same
// specification digest, and no active target displaced by another.
func CheckStack(cat Catalog, s *EvaluationStack) error {
	if s.Catalog != cat.Digest() {
		return fieldErr("catalog", "%s is not the catalog in force (%s)", s.Catalog, cat.Digest())
	}
	for i, e := range s.Entries {
		spec, ok := cat.TargetSpec(e.Target)
		if !ok {
			return fieldErr(fmt.Sprintf("entries[%d].target", i), "%q is not a registered target", e.Target)
		}
		if e.TargetSpec != spec {
			return fieldErr(fmt.Sprintf("entries[%d].target_spec", i), "%s is not %s's specification digest %s", e.TargetSpec, e.Target, spec)
		}
		displaces := cat.Displaces(e.Target)
		for _, o := range s.Entries {
			if slices.Contains(displaces, o.Target) {
				return fieldErr(fmt.Sprintf("entries[%d].target", i), "%s displaces the also active %s", e.Target, o.Target)
			}
		}
	}
	return nil
}

// Transition is the one registered target transition a candidate makes:
// the target and the proposal that would hold it.
type Transition struct {
	Target     string `json:"target"`
	TargetSpec string `json:"target_spec"`
	Proposal   string `json:"proposal"`
}

// CandidateStack is the stack the validator builds for a candidate: the
// incumbent with exactly one registered target transition. The
// transitioning entry has no crown yet.
type CandidateStack struct {
	// Incumbent is the digest of the evaluation stack it derives from.
	Incumbent  string     `json:"incumbent"`
	Arena      string     `json:"arena"`
	Catalog    string     `json:"catalog"`
	Generation int64      `json:"generation"`
	Transition Transition `json:"transition"`
	// Displaced lists the incumbent targets the transition removes.
	Displaced []string     `json:"displaced"`
	Entries   []StackEntry `json:"entries"`
}

// Domain implements Object.
func (*CandidateStack) Domain() string { return DomainCandidateStack }

// Validate implements Object.
func (c *CandidateStack) Validate() error {
	for _, f := range []struct{ name, v string }{{"incumbent", c.Incumbent}, {"arena", c.Arena}, {"catalog", c.Catalog}} {
		if err := checkDigest(f.name, f.v); err != nil {
			return err
		}
	}
	if c.Generation < 0 {
		return fieldErr("generation", "%d is negative", c.Generation)
	}
	if err := checkText("transition.target", c.Transition.Target); err != nil {
		return err
	}
	if err := checkDigest("transition.target_spec", c.Transition.TargetSpec); err != nil {
		return err
	}
	if err := checkDigest("transition.proposal", c.Transition.Proposal); err != nil {
		return err
	}
	if c.Displaced == nil {
		return fieldErr("displaced", "must be a list, not null")
	}
	if err := checkSortedUnique("displaced", c.Displaced); err != nil {
		return err
	}
	if err := checkEntries("entries", c.Entries, c.Transition.Target); err != nil {
		return err
	}
	i := slices.IndexFunc(c.Entries, func(e StackEntry) bool { return e.Target == c.Transition.Target })
	if i < 0 {
		return fieldErr("entries", "no entry for the transition target %s", c.Transition.Target)
	}
	if e := c.Entries[i]; e.Crown != "" || e.Proposal != c.Transition.Proposal || e.TargetSpec != c.Transition.TargetSpec {
		return fieldErr(fmt.Sprintf("entries[%d]", i), "does not match the transition")
	}
	return nil
}

// Candidate builds the candidate stack: the incumbent except for one
// registered target transition. It refuses an unregistered target, a stale
// catalog, and the split of an active atomic target; targets the new one
// displaces leave; every other incumbent entry is kept unchanged. The
// incumbent is not modified.
func Candidate(cat Catalog, inc EvaluationStack, target, proposal string) (CandidateStack, error) {
	if err := inc.Validate(); err != nil {
		return CandidateStack{}, fmt.Errorf("candidate stack: incumbent: %w", err)
	}
	if err := CheckStack(cat, &inc); err != nil {
		return CandidateStack{}, fmt.Errorf("candidate stack: incumbent: %w", err)
	}
	incDigest, err := Digest(&inc)
	if err != nil {
		return CandidateStack{}, fmt.Errorf("candidate stack: %w", err)
	}
	spec, ok := cat.TargetSpec(target)
	if !ok {
		return CandidateStack{}, fmt.Errorf("candidate stack: %q is not a registered target; a proposal is always one registered target delta", target)
	}
	next, displaced, err := cat.Activate(inc.Active(), target)
	if err != nil {
		return CandidateStack{}, fmt.Errorf("candidate stack: %w", err)
	}
	tr := Transition{Target: target, TargetSpec: spec, Proposal: proposal}
	c := CandidateStack{
		Incumbent: incDigest, Arena: inc.Arena, Catalog: inc.Catalog, Generation: inc.Generation,
		Transition: tr, Displaced: append([]string{}, displaced...),
		Entries: merge(inc.Entries, next, StackEntry{Target: target, TargetSpec: tr.TargetSpec, Proposal: proposal}),
	}
	if err := c.Validate(); err != nil {
		return CandidateStack{}, fmt.Errorf("candidate stack: %w", err)
	}
	return c, nil
}

// merge returns the entries for the active set next: the incumbent's entry
// for every target except the transitioning one, which gets add.
func merge(inc []StackEntry, next []string, add StackEntry) []StackEntry {
	out := make([]StackEntry, 0, len(next))
	for _, name := range next {
		if name == add.Target {
			out = append(out, add)
			continue
		}
		i := slices.IndexFunc(inc, func(e StackEntry) bool { return e.Target == name })
		out = append(out, inc[i])
	}
	return out
}

// ApplyCrown is settlement's evaluation-stack transition: the incumbent the
// crown was measured against, with the crowned target now held by the
// crowned proposal (displacing what the target displaces), at generation
// + 1. Nothing else changes. It refuses a crown measured against another
// stack, arena or catalog, a crown for the wrong generation, and a target
// specification digest that is not the catalog's. The incumbent is not
// modified.
func ApplyCrown(cat Catalog, inc EvaluationStack, crown CrownRecord) (EvaluationStack, error) {
	if err := crown.Validate(); err != nil {
		return EvaluationStack{}, fmt.Errorf("apply crown: crown: %w", err)
	}
	if err := inc.Validate(); err != nil {
		return EvaluationStack{}, fmt.Errorf("apply crown: incumbent: %w", err)
	}
	if err := CheckStack(cat, &inc); err != nil {
		return EvaluationStack{}, fmt.Errorf("apply crown: incumbent: %w", err)
	}
	incDigest, err := Digest(&inc)
	if err != nil {
		return EvaluationStack{}, fmt.Errorf("apply crown: %w", err)
	}
	switch {
	case crown.Incumbent != incDigest:
		return EvaluationStack{}, fmt.Errorf("apply crown: incumbent: the crown was measured against stack %s, not %s", crown.Incumbent, incDigest)
	case crown.Arena != inc.Arena:
		return EvaluationStack{}, fmt.Errorf("apply crown: arena: crown %s, stack %s", crown.Arena, inc.Arena)
	case crown.Catalog != inc.Catalog:
		return EvaluationStack{}, fmt.Errorf("apply crown: catalog: crown %s, stack %s", crown.Catalog, inc.Catalog)
	case crown.Generation != inc.Generation+1:
		return EvaluationStack{}, fmt.Errorf("apply crown: generation: crown creates %d, but the stack is at %d", crown.Generation, inc.Generation)
	}
	spec, ok := cat.TargetSpec(crown.Target)
	if !ok {
		return EvaluationStack{}, fmt.Errorf("apply crown: target: %q is not a registered target", crown.Target)
	}
	if crown.TargetSpec != spec {
		return EvaluationStack{}, fmt.Errorf("apply crown: target_spec: %s is not %s's specification digest %s", crown.TargetSpec, crown.Target, spec)
	}
	crownDigest, err := Digest(&crown)
	if err != nil {
		return EvaluationStack{}, fmt.Errorf("apply crown: %w", err)
	}
	next, _, err := cat.Activate(inc.Active(), crown.Target)
	if err != nil {
		return EvaluationStack{}, fmt.Errorf("apply crown: %w", err)
	}
	out := EvaluationStack{
		Arena: inc.Arena, Catalog: inc.Catalog, Generation: inc.Generation + 1,
		Entries: merge(inc.Entries, next, StackEntry{
			Target: crown.Target, TargetSpec: crown.TargetSpec,
			Proposal: crown.Attribution.Proposal, Crown: crownDigest,
		}),
	}
	if err := out.Validate(); err != nil {
		return EvaluationStack{}, fmt.Errorf("apply crown: result: %w", err)
	}
	return out, nil
}
