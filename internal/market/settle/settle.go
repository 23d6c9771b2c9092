// Package settle is settlement's pure planning: from the crown candidates
// that passed both qualification attempts, the current evaluation stack,
// the settlement journal's head and the earlier undecided reservations, it
// decides which candidates are crowned and which are held (and why), and
// writes the hash-chained events that continue the journal: CROWN,
// RETIREMENT of the target's previous holder, NEUTRALIZATION of what the
// catalog's displacement rules remove, STACK_TRANSITION (generation + 1).
//
// Nothing here does I/O: the same inputs give the same plan, byte for
// byte, which is what lets the store transaction (package
// settle/commit) re-plan inside the transaction and require equality. The
// journal's entries are canonical JSON envelopes under a domain of their
// own; DecodeEvent reads one strictly and Verify walks a journal and checks
// every link and digest (docs/market.md, "Settlement").
package settle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"cacheon/internal/canon"
)

// Canon domains of the objects settlement hashes.
const (
	DomainEvent    = "cacheon.settle.event"
	DomainStack    = "cacheon.settle.stack"
	DomainEvidence = "cacheon.settle.evidence"
)

// PPM is one (speedup 1.0) in integer parts per million.
const PPM = 1_000_000

// Order is a reservation's finalized order position: the block that
// included its reveal and the event index within it.
type Order struct {
	Block uint64 `json:"block"`
	Index uint32 `json:"index"`
}

// Less reports whether o is ordered before p.
func (o Order) Less(p Order) bool {
	if o.Block != p.Block {
		return o.Block < p.Block
	}
	return o.Index < p.Index
}

// Candidate is one crown candidate: a reservation whose proposal passed
// both qualification attempts against one incumbent stack.
type Candidate struct {
	Reservation string `json:"reservation"`
	// Proposal is the proposal's content hash, Contributor the hotkey.
	Proposal    string `json:"proposal"`
	Contributor string `json:"contributor"`
	Target      string `json:"target"`
	// Incumbent is the digest of the evaluation stack both attempts were
	// qualified against.
	Incumbent string `json:"incumbent"`
	// SpeedupPPM is the crown speedup (the lower reproduced r) in integer
	// parts per million, greater than PPM.
	SpeedupPPM int64 `json:"speedup_ppm"`
	// Order is the finalized order position of the reveal; SubmitBlock
	// the proposal's submission block (the crowned block of its claim).
	Order       Order  `json:"order"`
	SubmitBlock uint64 `json:"submit_block"`
	// Evidence is the two attempts' evidence refs (digests).
	Evidence [2]string `json:"evidence"`
}

// SpeedupPPM converts an exact decimal speedup to integer parts per
// million, rounding down (a crown is never credited more than measured).
func SpeedupPPM(d canon.Decimal) (int64, error) {
	q, err := RatioPPM(d)
	if err != nil || q <= PPM {
		return 0, fmt.Errorf("speedup %s: a crown speedup is greater than 1 and below 9e12", d)
	}
	return q, nil
}

// RatioPPM converts an exact non-negative decimal ratio (a measured r,
// faster or not) to integer parts per million, rounding down.
func RatioPPM(d canon.Decimal) (int64, error) {
	if err := d.CheckCanonical(); err != nil {
		return 0, fmt.Errorf("ratio: %w", err)
	}
	r, err := ratOf(d)
	if err != nil {
		return 0, err
	}
	r.Mul(r, ratInt(PPM))
	q := floorRat(r)
	if !q.IsInt64() || q.Sign() < 0 {
		return 0, fmt.Errorf("ratio %s: want a decimal in [0, 9e12)", d)
	}
	return q.Int64(), nil
}

func (c Candidate) validate() error {
	for _, f := range []struct{ name, v string }{
		{"proposal", c.Proposal}, {"incumbent", c.Incumbent}, {"evidence[0]", c.Evidence[0]}, {"evidence[1]", c.Evidence[1]},
	} {
		if err := canon.ValidDigest(f.v); err != nil {
			return fmt.Errorf("candidate %s: %s: %w", c.Reservation, f.name, err)
		}
	}
	switch {
	case c.Reservation == "":
		return fmt.Errorf("candidate: empty reservation id")
	case c.Target == "":
		return fmt.Errorf("candidate %s: empty target", c.Reservation)
	case c.Contributor == "":
		return fmt.Errorf("candidate %s: empty contributor", c.Reservation)
	case c.SpeedupPPM <= PPM:
		return fmt.Errorf("candidate %s: speedup %d ppm: a crown speedup is greater than %d", c.Reservation, c.SpeedupPPM, PPM)
	case c.Evidence[0] == c.Evidence[1]:
		return fmt.Errorf("candidate %s: both attempts name evidence %s: two independent attempts are needed", c.Reservation, c.Evidence[0])
	}
	return nil
}

// Pending is an earlier reservation that is not decided yet (still in
// intake or qualification). Target is "" when it is not known yet (the
// bundle was not fetched): such a reservation overlaps every target.
type Pending struct {
	Reservation string `json:"reservation"`
	Target      string `json:"target"`
	Order       Order  `json:"order"`
}

// Entry is one active target of the evaluation stack and who holds it.
type Entry struct {
	Target      string `json:"target"`
	Proposal    string `json:"proposal"`
	Contributor string `json:"contributor"`
	Reservation string `json:"reservation"`
	// Crown is the digest of the CROWN event that put the entry there.
	Crown string `json:"crown"`
}

// Stack is settlement's view of the evaluation stack: its generation and
// entries sorted by target. Its digest is StackDigest.
type Stack struct {
	Generation int64   `json:"generation"`
	Entries    []Entry `json:"entries"`
}

// Genesis is the generation-0 stack: stock everywhere.
func Genesis() Stack { return Stack{Generation: 0, Entries: []Entry{}} }

// StackDigest is canon.Digest(DomainStack, 1, s).
func StackDigest(s Stack) (string, error) {
	if s.Entries == nil {
		s.Entries = []Entry{}
	}
	return canon.Digest(DomainStack, 1, s)
}

// DecodeStack reads a stack's canonical encoding (canon.Marshal of it)
// strictly and returns the stack and its digest, computed over the very
// bytes: the canonical envelope is {"domain":…,"payload":BODY,
// "schema_version":1}, keys in that order.
func DecodeStack(body []byte) (Stack, string, error) {
	var st Stack
	if err := canon.Decode(body, &st); err != nil {
		return Stack{}, "", fmt.Errorf("stack: %w", err)
	}
	if err := st.Validate(); err != nil {
		return Stack{}, "", err
	}
	h := sha256.New()
	h.Write([]byte(`{"domain":"` + DomainStack + `","payload":`))
	h.Write(body)
	h.Write([]byte(`,"schema_version":1}`))
	return st, hex.EncodeToString(h.Sum(nil)), nil
}

// Validate checks the entries are sorted by target, unique, and complete.
func (s Stack) Validate() error {
	if s.Generation < 0 {
		return fmt.Errorf("stack: generation %d is negative", s.Generation)
	}
	if s.Entries == nil {
		return fmt.Errorf("stack: entries must be a list, not null")
	}
	for i, e := range s.Entries {
		if e.Target == "" || e.Reservation == "" || e.Contributor == "" {
			return fmt.Errorf("stack: entries[%d]: empty target, reservation or contributor", i)
		}
		if err := canon.ValidDigest(e.Proposal); err != nil {
			return fmt.Errorf("stack: entries[%d].proposal: %w", i, err)
		}
		if err := canon.ValidDigest(e.Crown); err != nil {
			return fmt.Errorf("stack: entries[%d].crown: %w", i, err)
		}
		if i > 0 && s.Entries[i-1].Target >= e.Target {
			return fmt.Errorf("stack: entries[%d]: %s is not after %s (sorted, unique)", i, e.Target, s.Entries[i-1].Target)
		}
	}
	return nil
}

// active returns the stack's target names, sorted.
func (s Stack) active() []string {
	out := make([]string, len(s.Entries))
	for i, e := range s.Entries {
		out[i] = e.Target
	}
	return out
}

func (s Stack) entry(target string) (Entry, bool) {
	i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.Target == target })
	if i < 0 {
		return Entry{}, false
	}
	return s.Entries[i], true
}

// Catalog is what planning needs of the registered target catalog;
// *target.Catalog satisfies it.
type Catalog interface {
	// Displaces returns the targets name displaces while active.
	Displaces(name string) []string
	// Activate returns the active set after making name active (refusing
	// an unregistered target or the split of an active atomic target) and
	// the targets it displaced.
	Activate(active []string, name string) (next, displaced []string, err error)
}

// Overlap reports whether two targets cannot be decided independently:
// the same target, or one displaces the other. An unknown target ("")
// overlaps every target.
func Overlap(cat Catalog, a, b string) bool {
	if a == "" || b == "" || a == b {
		return true
	}
	return slices.Contains(cat.Displaces(a), b) || slices.Contains(cat.Displaces(b), a)
}
