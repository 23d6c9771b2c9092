package settle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"

	"cacheon/internal/canon"
)

// Kind is the kind of a settlement event.
type Kind string

// The event kinds, in the order one crown writes them.
const (
	KindCrown           Kind = "CROWN"
	KindRetirement      Kind = "RETIREMENT"
	KindNeutralization  Kind = "NEUTRALIZATION"
	KindStackTransition Kind = "STACK_TRANSITION"
)

// Event is one settlement journal entry. Every event of one crown names
// the crowned reservation; Prev is the digest of the event before it in
// the journal ("" only for the first), so the journal is a hash chain.
type Event struct {
	Seq         int64  `json:"seq"`
	Prev        string `json:"prev"`
	Kind        Kind   `json:"kind"`
	Reservation string `json:"reservation"`
	// Target, Proposal, Contributor: the crowned ones for CROWN and
	// STACK_TRANSITION; the removed entry's for RETIREMENT and
	// NEUTRALIZATION, whose Holder is the removed entry's reservation.
	Target      string `json:"target"`
	Proposal    string `json:"proposal"`
	Contributor string `json:"contributor"`
	Holder      string `json:"holder"`
	// CROWN only: the speedup, the crowned block (the proposal's
	// submission block) and the two attempts' evidence refs, sorted.
	SpeedupPPM int64    `json:"speedup_ppm"`
	Block      uint64   `json:"block"`
	Evidence   []string `json:"evidence"`
	// Generation is the stack generation the crown creates. Stack is the
	// new stack's digest in STACK_TRANSITION and the incumbent's in the
	// others.
	Generation int64  `json:"generation"`
	Stack      string `json:"stack"`
}

type envelope struct {
	Domain        string `json:"domain"`
	Payload       Event  `json:"payload"`
	SchemaVersion int    `json:"schema_version"`
}

// Encode returns the event's canonical envelope and its digest (the
// SHA-256 of those bytes, which is canon.Digest(DomainEvent, 1, ev)).
func (ev Event) Encode() (data []byte, digest string, err error) {
	if ev.Evidence == nil {
		ev.Evidence = []string{}
	}
	if err := ev.Validate(); err != nil {
		return nil, "", fmt.Errorf("encode event %d: %w", ev.Seq, err)
	}
	data, err = canon.Marshal(envelope{Domain: DomainEvent, Payload: ev, SchemaVersion: 1})
	if err != nil {
		return nil, "", fmt.Errorf("encode event %d: %w", ev.Seq, err)
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), nil
}

// MaxEventSize bounds an encoded event (DecodeEvent refuses more).
const MaxEventSize = 64 << 10

// DecodeEvent is the strict reader of a journal entry: the exact canonical
// envelope of an Event under DomainEvent, schema version 1, that passes
// Validate. It returns the event and its digest.
func DecodeEvent(data []byte) (Event, string, error) {
	if len(data) > MaxEventSize {
		return Event{}, "", fmt.Errorf("read settlement event: %d bytes, more than %d", len(data), MaxEventSize)
	}
	var env envelope
	if err := canon.Decode(data, &env); err != nil {
		return Event{}, "", fmt.Errorf("read settlement event: %w", err)
	}
	if env.Domain != DomainEvent {
		return Event{}, "", fmt.Errorf("read settlement event: $.domain: %q is not %q", env.Domain, DomainEvent)
	}
	if env.SchemaVersion != 1 {
		return Event{}, "", fmt.Errorf("read settlement event: $.schema_version: %d is not supported (want 1)", env.SchemaVersion)
	}
	if err := env.Payload.Validate(); err != nil {
		return Event{}, "", fmt.Errorf("read settlement event: $.payload: %w", err)
	}
	sum := sha256.Sum256(data)
	return env.Payload, hex.EncodeToString(sum[:]), nil
}

// Validate checks an event's own invariants (not its link: see Verify).
func (ev Event) Validate() error {
	if ev.Seq < 1 {
		return fmt.Errorf("seq %d: the journal starts at 1", ev.Seq)
	}
	if ev.Seq == 1 && ev.Prev != "" {
		return fmt.Errorf("prev: the first event links to nothing, not %q", ev.Prev)
	}
	if ev.Seq > 1 {
		if err := canon.ValidDigest(ev.Prev); err != nil {
			return fmt.Errorf("prev: %w", err)
		}
	}
	if ev.Reservation == "" || ev.Target == "" || ev.Contributor == "" {
		return fmt.Errorf("empty reservation, target or contributor")
	}
	if err := canon.ValidDigest(ev.Proposal); err != nil {
		return fmt.Errorf("proposal: %w", err)
	}
	if err := canon.ValidDigest(ev.Stack); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	if ev.Generation < 1 {
		return fmt.Errorf("generation %d: a crown creates generation 1 or later", ev.Generation)
	}
	if ev.Evidence == nil {
		return fmt.Errorf("evidence: must be a list, not null")
	}
	crown := ev.Kind == KindCrown
	switch ev.Kind {
	case KindCrown, KindStackTransition:
		if ev.Holder != "" {
			return fmt.Errorf("holder: a %s event has none", ev.Kind)
		}
	case KindRetirement, KindNeutralization:
		if ev.Holder == "" {
			return fmt.Errorf("holder: a %s event names the removed entry's reservation", ev.Kind)
		}
	default:
		return fmt.Errorf("kind %q is not an event kind", ev.Kind)
	}
	if crown {
		if ev.SpeedupPPM <= PPM {
			return fmt.Errorf("speedup_ppm %d: a crown speedup is greater than %d", ev.SpeedupPPM, PPM)
		}
		if len(ev.Evidence) != 2 || !slices.IsSorted(ev.Evidence) || ev.Evidence[0] == ev.Evidence[1] {
			return fmt.Errorf("evidence: a crown names two distinct evidence refs, sorted")
		}
		for i, e := range ev.Evidence {
			if err := canon.ValidDigest(e); err != nil {
				return fmt.Errorf("evidence[%d]: %w", i, err)
			}
		}
		return nil
	}
	if ev.SpeedupPPM != 0 || ev.Block != 0 || len(ev.Evidence) != 0 {
		return fmt.Errorf("speedup_ppm, block, evidence: only a CROWN event has them")
	}
	return nil
}

// Head is where a journal ends: the last event's sequence number and
// digest (0 and "" for an empty journal).
type Head struct {
	Seq    int64  `json:"seq"`
	Digest string `json:"digest"`
}

// Record is a stored journal entry: the sequence number, the digest and
// the encoded event as the store keeps them.
type Record struct {
	Seq    int64
	Digest string
	Data   []byte
}

// VerifyError names the first journal entry that breaks the chain.
type VerifyError struct {
	Seq    int64
	Reason string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("settlement journal: event %d: %s", e.Seq, e.Reason)
}

// Verify walks a journal in order and checks every entry: it decodes
// strictly, its sequence number is the next one, its stored digest is the
// digest of its bytes, and its Prev is the digest of the entry before. It
// returns the head, or a *VerifyError naming the first bad entry.
func Verify(records []Record) (Head, error) {
	var head Head
	for _, r := range records {
		want := head.Seq + 1
		ev, d, err := DecodeEvent(r.Data)
		switch {
		case r.Seq != want:
			return head, &VerifyError{Seq: r.Seq, Reason: fmt.Sprintf("sequence number %d, want %d", r.Seq, want)}
		case err != nil:
			return head, &VerifyError{Seq: r.Seq, Reason: err.Error()}
		case d != r.Digest:
			return head, &VerifyError{Seq: r.Seq, Reason: fmt.Sprintf("stored digest %s, but the event's bytes digest to %s", r.Digest, d)}
		case ev.Seq != r.Seq:
			return head, &VerifyError{Seq: r.Seq, Reason: fmt.Sprintf("stored at %d, but the event says seq %d", r.Seq, ev.Seq)}
		case ev.Prev != head.Digest:
			return head, &VerifyError{Seq: r.Seq, Reason: fmt.Sprintf("prev %q, but event %d's digest is %q", ev.Prev, head.Seq, head.Digest)}
		}
		head = Head{Seq: r.Seq, Digest: d}
	}
	return head, nil
}

func ratOf(d canon.Decimal) (*big.Rat, error) {
	r, ok := new(big.Rat).SetString(string(d))
	if !ok {
		return nil, fmt.Errorf("decimal %q: not a decimal number", d)
	}
	return r, nil
}

func ratInt(n int64) *big.Rat { return new(big.Rat).SetInt64(n) }

// floorRat returns floor(r) for r >= 0.
func floorRat(r *big.Rat) *big.Int {
	return new(big.Int).Quo(r.Num(), r.Denom())
}
