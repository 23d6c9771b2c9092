package settle

import (
	"fmt"
	"reflect"
	"slices"

	"cacheon/internal/canon"
)

// Reasons a candidate is held. Each but stale_incumbent is followed by a
// colon and the reservation that caused it.
const (
	// HeldStale: the candidate was qualified against a stack that is no
	// longer current.
	HeldStale = "stale_incumbent"
	// HeldBlocked: an earlier reservation for an overlapping target is not
	// decided yet (economic FIFO).
	HeldBlocked = "blocked_by"
	// HeldConflict: another candidate for the same target won (higher
	// speedup, or equal and earlier).
	HeldConflict = "conflict_lost"
	// HeldAdvanced: a winner for an overlapping target (one displaces the
	// other) changes this candidate's incumbent.
	HeldAdvanced = "incumbent_advanced"
	// HeldNotActivatable: the catalog refuses the target over the current
	// stack (it would split an active atomic target).
	HeldNotActivatable = "not_activatable"
)

// Input is what a plan is made from.
type Input struct {
	Candidates []Candidate `json:"candidates"`
	Stack      Stack       `json:"stack"`
	// StackDigest is the digest the store holds for Stack; it must be
	// StackDigest(Stack).
	StackDigest string `json:"stack_digest"`
	// Head is the settlement journal's head.
	Head Head `json:"head"`
	// Blockers are the undecided reservations (any order).
	Blockers []Pending `json:"blockers"`
}

// Held is a candidate that is not crowned, and why.
type Held struct {
	Reservation string `json:"reservation"`
	Reason      string `json:"reason"`
}

// Claim is a standing reward claim as settlement writes it.
type Claim struct {
	Reservation string `json:"reservation"`
	Hotkey      string `json:"hotkey"`
	Target      string `json:"target"`
	Proposal    string `json:"proposal"`
	SpeedupPPM  int64  `json:"speedup_ppm"`
	// CrownedBlock is the proposal's submission block.
	CrownedBlock uint64 `json:"crowned_block"`
	Generation   int64  `json:"generation"`
}

// Crown is one winner's part of a plan.
type Crown struct {
	Candidate Candidate `json:"candidate"`
	// Events: CROWN, RETIREMENT (if the target had a holder),
	// NEUTRALIZATION (each displaced holder), STACK_TRANSITION; with
	// Digests, their digests, and Data, their encoded bytes.
	Events  []Event  `json:"events"`
	Digests []string `json:"digests"`
	Data    [][]byte `json:"data"`
	// Claim is the new standing claim; Supersedes the reservations whose
	// claims it deactivates (the retired and neutralized holders).
	Claim      Claim    `json:"claim"`
	Supersedes []string `json:"supersedes"`
	// Stack is the stack after this crown and StackDigest its digest.
	Stack       Stack  `json:"stack"`
	StackDigest string `json:"stack_digest"`
}

// Plan is the outcome of planning: the held candidates in finalized
// order, the crowns in the order they apply (finalized order), the final
// stack and the journal head after the crowns' events.
type Plan struct {
	Held        []Held  `json:"held"`
	Crowns      []Crown `json:"crowns"`
	Stack       Stack   `json:"stack"`
	StackDigest string  `json:"stack_digest"`
	Head        Head    `json:"head"`
}

// Equal reports whether two plans are the same: the same held
// candidates and reasons, the same crowns with byte-identical events, the
// same stacks and head.
func (p Plan) Equal(q Plan) bool { return reflect.DeepEqual(p, q) }

// Events returns every event of the plan in journal order.
func (p Plan) Events() []Event {
	var out []Event
	for _, c := range p.Crowns {
		out = append(out, c.Events...)
	}
	return out
}

// Make plans settlement. The rules, in order, for each candidate:
//  1. its incumbent is not the current stack → held stale_incumbent;
//  2. an earlier undecided reservation for an overlapping target →
//     held blocked_by:<the earliest such>;
//  3. the catalog refuses its target over the current stack → held
//     not_activatable:<reason>;
//  4. the rest are ranked by speedup (higher first), then finalized
//     order (earlier first); a candidate overlapping a better-ranked
//     winner is held conflict_lost:<winner> (same target) or
//     incumbent_advanced:<winner> (a target one of them displaces), the
//     others win.
//
// Winners apply in finalized order, each creating the next stack
// generation with the events CROWN, RETIREMENT, NEUTRALIZATION…,
// STACK_TRANSITION chained onto the journal head. The same input, in any
// order of candidates and blockers, gives the same plan.
func Make(cat Catalog, in Input) (Plan, error) {
	if err := in.Stack.Validate(); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	cur, err := StackDigest(in.Stack)
	if err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	if in.StackDigest != cur {
		return Plan{}, fmt.Errorf("plan: the stack's stored digest %s is not its digest %s", in.StackDigest, cur)
	}
	if in.Head.Seq < 0 || (in.Head.Seq == 0) != (in.Head.Digest == "") {
		return Plan{}, fmt.Errorf("plan: journal head %d %q: an empty journal has no digest, any other one has", in.Head.Seq, in.Head.Digest)
	}
	cands := slices.Clone(in.Candidates)
	seen := map[string]bool{}
	for _, c := range cands {
		if err := c.validate(); err != nil {
			return Plan{}, fmt.Errorf("plan: %w", err)
		}
		if seen[c.Reservation] {
			return Plan{}, fmt.Errorf("plan: candidate %s listed twice", c.Reservation)
		}
		seen[c.Reservation] = true
	}
	slices.SortFunc(cands, byOrder)
	blockers := slices.Clone(in.Blockers)
	slices.SortFunc(blockers, func(a, b Pending) int {
		if a.Order != b.Order {
			if a.Order.Less(b.Order) {
				return -1
			}
			return 1
		}
		return cmpString(a.Reservation, b.Reservation)
	})

	held := map[string]string{}
	var eligible []Candidate
	for _, c := range cands {
		if c.Incumbent != cur {
			held[c.Reservation] = HeldStale
			continue
		}
		if b, ok := blockedBy(cat, blockers, c); ok {
			held[c.Reservation] = HeldBlocked + ":" + b
			continue
		}
		if _, _, err := cat.Activate(in.Stack.active(), c.Target); err != nil {
			held[c.Reservation] = HeldNotActivatable + ":" + err.Error()
			continue
		}
		eligible = append(eligible, c)
	}
	slices.SortStableFunc(eligible, func(a, b Candidate) int {
		if a.SpeedupPPM != b.SpeedupPPM {
			if a.SpeedupPPM > b.SpeedupPPM {
				return -1
			}
			return 1
		}
		return byOrder(a, b)
	})
	var winners []Candidate
	for _, c := range eligible {
		i := slices.IndexFunc(winners, func(w Candidate) bool { return Overlap(cat, w.Target, c.Target) })
		switch {
		case i < 0:
			winners = append(winners, c)
		case winners[i].Target == c.Target:
			held[c.Reservation] = HeldConflict + ":" + winners[i].Reservation
		default:
			held[c.Reservation] = HeldAdvanced + ":" + winners[i].Reservation
		}
	}
	slices.SortFunc(winners, byOrder)

	p := Plan{Held: []Held{}, Crowns: []Crown{}, Stack: in.Stack, StackDigest: cur, Head: in.Head}
	for _, c := range cands {
		if r, ok := held[c.Reservation]; ok {
			p.Held = append(p.Held, Held{Reservation: c.Reservation, Reason: r})
		}
	}
	for _, w := range winners {
		cr, err := crown(cat, p.Stack, p.StackDigest, p.Head, w)
		if err != nil {
			return Plan{}, fmt.Errorf("plan: crown %s: %w", w.Reservation, err)
		}
		p.Crowns = append(p.Crowns, cr)
		p.Stack, p.StackDigest = cr.Stack, cr.StackDigest
		p.Head = Head{Seq: cr.Events[len(cr.Events)-1].Seq, Digest: cr.Digests[len(cr.Digests)-1]}
	}
	if p.Stack.Entries == nil {
		p.Stack.Entries = []Entry{}
	}
	return p, nil
}

func byOrder(a, b Candidate) int {
	if a.Order != b.Order {
		if a.Order.Less(b.Order) {
			return -1
		}
		return 1
	}
	return cmpString(a.Reservation, b.Reservation)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// blockedBy returns the earliest blocker ordered before c whose target
// overlaps c's.
func blockedBy(cat Catalog, blockers []Pending, c Candidate) (string, bool) {
	for _, b := range blockers {
		if !b.Order.Less(c.Order) {
			return "", false
		}
		if b.Reservation != c.Reservation && Overlap(cat, b.Target, c.Target) {
			return b.Reservation, true
		}
	}
	return "", false
}

// crown builds one winner's events and the stack after it.
func crown(cat Catalog, inc Stack, incDigest string, head Head, w Candidate) (Crown, error) {
	gen := inc.Generation + 1
	next, displaced, err := cat.Activate(inc.active(), w.Target)
	if err != nil {
		return Crown{}, err
	}
	ev := slices.Clone(w.Evidence[:])
	slices.Sort(ev)
	events := []Event{{Kind: KindCrown, Reservation: w.Reservation, Target: w.Target, Proposal: w.Proposal,
		Contributor: w.Contributor, SpeedupPPM: w.SpeedupPPM, Block: w.SubmitBlock, Evidence: ev,
		Generation: gen, Stack: incDigest}}
	var supersedes []string
	removed := func(kind Kind, e Entry) {
		events = append(events, Event{Kind: kind, Reservation: w.Reservation, Target: e.Target, Proposal: e.Proposal,
			Contributor: e.Contributor, Holder: e.Reservation, Evidence: []string{}, Generation: gen, Stack: incDigest})
		supersedes = append(supersedes, e.Reservation)
	}
	if e, ok := inc.entry(w.Target); ok {
		removed(KindRetirement, e)
	}
	for _, d := range displaced {
		if e, ok := inc.entry(d); ok {
			removed(KindNeutralization, e)
		}
	}
	cr := Crown{Candidate: w, Supersedes: supersedes, Claim: Claim{
		Reservation: w.Reservation, Hotkey: w.Contributor, Target: w.Target, Proposal: w.Proposal,
		SpeedupPPM: w.SpeedupPPM, CrownedBlock: w.SubmitBlock, Generation: gen,
	}}
	if cr.Supersedes == nil {
		cr.Supersedes = []string{}
	}
	// The events before STACK_TRANSITION are chained now: the crown's
	// digest is part of the new stack, whose digest the transition names.
	for i := range events {
		if err := link(&cr, &head, events[i]); err != nil {
			return Crown{}, err
		}
	}
	out := Stack{Generation: gen, Entries: make([]Entry, 0, len(next))}
	for _, name := range next {
		if name == w.Target {
			out.Entries = append(out.Entries, Entry{Target: w.Target, Proposal: w.Proposal, Contributor: w.Contributor,
				Reservation: w.Reservation, Crown: cr.Digests[0]})
			continue
		}
		e, _ := inc.entry(name)
		out.Entries = append(out.Entries, e)
	}
	d, err := StackDigest(out)
	if err != nil {
		return Crown{}, err
	}
	cr.Stack, cr.StackDigest = out, d
	err = link(&cr, &head, Event{Kind: KindStackTransition, Reservation: w.Reservation, Target: w.Target,
		Proposal: w.Proposal, Contributor: w.Contributor, Evidence: []string{}, Generation: gen, Stack: d})
	return cr, err
}

// link chains ev onto head and appends it to the crown.
func link(cr *Crown, head *Head, ev Event) error {
	ev.Seq, ev.Prev = head.Seq+1, head.Digest
	data, d, err := ev.Encode()
	if err != nil {
		return err
	}
	cr.Events, cr.Digests, cr.Data = append(cr.Events, ev), append(cr.Digests, d), append(cr.Data, data)
	*head = Head{Seq: ev.Seq, Digest: d}
	return nil
}

// Attempt is what one qualification attempt's evidence says about the
// settlement: what was measured, against what, and its speedup.
type Attempt struct {
	Ref        string `json:"ref"`
	Proposal   string `json:"proposal"`
	Target     string `json:"target"`
	Incumbent  string `json:"incumbent"`
	SpeedupPPM int64  `json:"speedup_ppm"`
}

type settlementEvidence struct {
	Proposal   string   `json:"proposal"`
	Target     string   `json:"target"`
	Incumbent  string   `json:"incumbent"`
	SpeedupPPM int64    `json:"speedup_ppm"`
	Evidence   []string `json:"evidence"`
}

// CandidateEvidence is the settlement evidence a candidate claims: the
// canonical bytes of its proposal, target, incumbent, crown speedup and
// evidence refs.
func CandidateEvidence(c Candidate) ([]byte, error) {
	refs := []string{c.Evidence[0], c.Evidence[1]}
	slices.Sort(refs)
	return canon.Marshal(settlementEvidence{Proposal: c.Proposal, Target: c.Target, Incumbent: c.Incumbent,
		SpeedupPPM: c.SpeedupPPM, Evidence: refs})
}

// AttemptsEvidence is the settlement evidence two re-opened attempts give:
// they must agree on proposal, target and incumbent, and the crown speedup
// is the lower of the two. Settlement requires it byte-identical to
// CandidateEvidence.
func AttemptsEvidence(a, b Attempt) ([]byte, error) {
	if a.Proposal != b.Proposal || a.Target != b.Target || a.Incumbent != b.Incumbent {
		return nil, fmt.Errorf("settlement evidence: attempts %s and %s measured different things", a.Ref, b.Ref)
	}
	refs := []string{a.Ref, b.Ref}
	slices.Sort(refs)
	return canon.Marshal(settlementEvidence{Proposal: a.Proposal, Target: a.Target, Incumbent: a.Incumbent,
		SpeedupPPM: min(a.SpeedupPPM, b.SpeedupPPM), Evidence: refs})
}
