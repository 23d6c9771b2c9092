package settle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"cacheon/internal/canon"
	"cacheon/internal/slot"
	"cacheon/internal/target"
)

// fakeCatalog: singletons a, b, c and the atomic ab, which displaces a and b.
type fakeCatalog struct{}

var fakeDisplaces = map[string][]string{"ab": {"a", "b"}}

func (fakeCatalog) Displaces(name string) []string { return slices.Clone(fakeDisplaces[name]) }

func (fakeCatalog) Activate(active []string, name string) ([]string, []string, error) {
	if !slices.Contains([]string{"a", "b", "c", "ab"}, name) {
		return nil, nil, fmt.Errorf("%q is not a registered target", name)
	}
	var next, displaced []string
	for _, a := range active {
		if a != name && slices.Contains(fakeDisplaces[a], name) {
			return nil, nil, fmt.Errorf("would split active atomic target %s", a)
		}
		if slices.Contains(fakeDisplaces[name], a) {
			displaced = append(displaced, a)
		} else if a != name {
			next = append(next, a)
		}
	}
	next = append(next, name)
	sort.Strings(next)
	return next, displaced, nil
}

func dg(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func mustDigest(t testing.TB, s Stack) string {
	t.Helper()
	d, err := StackDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// cand is a candidate for target against incumbent inc at block.
func cand(id, tgt, inc string, ppm int64, block uint64) Candidate {
	return Candidate{Reservation: id, Proposal: dg("p" + id), Contributor: "hk-" + id, Target: tgt, Incumbent: inc,
		SpeedupPPM: ppm, Order: Order{Block: block}, SubmitBlock: block - 1, Evidence: [2]string{dg("e1" + id), dg("e2" + id)}}
}

// held stack: a held by r0 and b held by r1 (generation 2).
func stackAB() Stack {
	return Stack{Generation: 2, Entries: []Entry{
		{Target: "a", Proposal: dg("pa"), Contributor: "hk-0", Reservation: "r0", Crown: dg("ca")},
		{Target: "b", Proposal: dg("pb"), Contributor: "hk-1", Reservation: "r1", Crown: dg("cb")},
	}}
}

func TestMake(t *testing.T) {
	gen := Genesis()
	g := mustDigest(t, gen)
	ab := stackAB()
	abd := mustDigest(t, ab)
	withAB := Stack{Generation: 1, Entries: []Entry{{Target: "ab", Proposal: dg("pab"), Contributor: "hk-9", Reservation: "r9", Crown: dg("cab")}}}
	wabd := mustDigest(t, withAB)
	type kinds []Kind
	tests := []struct {
		name     string
		stack    Stack
		cands    []Candidate
		blockers []Pending
		held     map[string]string
		crowned  []string         // reservations, in order
		events   map[string]kinds // per crowned reservation
		super    map[string][]string
	}{
		{name: "nothing", stack: gen},
		{name: "one crown over genesis", stack: gen, cands: []Candidate{cand("x", "a", g, 1_050_000, 10)},
			crowned: []string{"x"}, events: map[string]kinds{"x": {KindCrown, KindStackTransition}}},
		{name: "stale incumbent", stack: gen, cands: []Candidate{cand("x", "a", dg("old"), 1_050_000, 10)},
			held: map[string]string{"x": HeldStale}},
		{name: "retirement of the previous holder", stack: ab, cands: []Candidate{cand("x", "a", abd, 1_020_000, 10)},
			crowned: []string{"x"}, events: map[string]kinds{"x": {KindCrown, KindRetirement, KindStackTransition}},
			super: map[string][]string{"x": {"r0"}}},
		{name: "atomic neutralizes overlapping singletons", stack: ab, cands: []Candidate{cand("x", "ab", abd, 1_020_000, 10)},
			crowned: []string{"x"}, events: map[string]kinds{"x": {KindCrown, KindNeutralization, KindNeutralization, KindStackTransition}},
			super: map[string][]string{"x": {"r0", "r1"}}},
		{name: "singleton cannot split an active atomic", stack: withAB, cands: []Candidate{cand("x", "a", wabd, 1_300_000, 10)},
			held: map[string]string{"x": HeldNotActivatable + ":would split active atomic target ab"}},
		{name: "highest speedup wins the target", stack: gen,
			cands:   []Candidate{cand("x", "a", g, 1_050_000, 10), cand("y", "a", g, 1_060_000, 11)},
			crowned: []string{"y"}, held: map[string]string{"x": HeldConflict + ":y"},
			events: map[string]kinds{"y": {KindCrown, KindStackTransition}}},
		{name: "tie goes to the earlier finalized order", stack: gen,
			cands:   []Candidate{cand("y", "a", g, 1_050_000, 11), cand("x", "a", g, 1_050_000, 10)},
			crowned: []string{"x"}, held: map[string]string{"y": HeldConflict + ":x"},
			events: map[string]kinds{"x": {KindCrown, KindStackTransition}}},
		{name: "tie in one block goes to the earlier index", stack: gen,
			cands: []Candidate{
				func() Candidate { c := cand("y", "a", g, 1_050_000, 10); c.Order.Index = 2; return c }(),
				func() Candidate { c := cand("x", "a", g, 1_050_000, 10); c.Order.Index = 1; return c }(),
			},
			crowned: []string{"x"}, held: map[string]string{"y": HeldConflict + ":x"},
			events: map[string]kinds{"x": {KindCrown, KindStackTransition}}},
		{name: "atomic beats overlapping singletons: incumbent advanced", stack: gen,
			cands:   []Candidate{cand("x", "a", g, 1_050_000, 10), cand("y", "ab", g, 1_080_000, 11), cand("z", "b", g, 1_070_000, 12)},
			crowned: []string{"y"}, held: map[string]string{"x": HeldAdvanced + ":y", "z": HeldAdvanced + ":y"},
			events: map[string]kinds{"y": {KindCrown, KindStackTransition}}},
		{name: "disjoint singletons both win, in finalized order", stack: gen,
			cands:   []Candidate{cand("z", "c", g, 1_090_000, 12), cand("x", "a", g, 1_050_000, 10), cand("y", "ab", g, 1_040_000, 11)},
			crowned: []string{"x", "z"}, held: map[string]string{"y": HeldAdvanced + ":x"},
			events: map[string]kinds{"x": {KindCrown, KindStackTransition}, "z": {KindCrown, KindStackTransition}}},
		{name: "economic FIFO: an earlier undecided overlapping reservation blocks", stack: gen,
			cands:    []Candidate{cand("x", "a", g, 1_050_000, 10), cand("z", "c", g, 1_050_000, 10)},
			blockers: []Pending{{Reservation: "p2", Target: "ab", Order: Order{Block: 9}}, {Reservation: "p1", Target: "a", Order: Order{Block: 8}}},
			held:     map[string]string{"x": HeldBlocked + ":p1"}, crowned: []string{"z"},
			events: map[string]kinds{"z": {KindCrown, KindStackTransition}}},
		{name: "economic FIFO: a later or unrelated reservation does not block", stack: gen,
			cands:    []Candidate{cand("x", "a", g, 1_050_000, 10)},
			blockers: []Pending{{Reservation: "p1", Target: "a", Order: Order{Block: 11}}, {Reservation: "p2", Target: "c", Order: Order{Block: 3}}},
			crowned:  []string{"x"}, events: map[string]kinds{"x": {KindCrown, KindStackTransition}}},
		{name: "economic FIFO: an unknown target blocks everything after it", stack: gen,
			cands:    []Candidate{cand("x", "a", g, 1_050_000, 10)},
			blockers: []Pending{{Reservation: "p1", Target: "", Order: Order{Block: 4}}},
			held:     map[string]string{"x": HeldBlocked + ":p1"}},
		{name: "a blocked candidate does not compete", stack: gen,
			cands:    []Candidate{cand("x", "a", g, 1_090_000, 10), cand("y", "a", g, 1_050_000, 8)},
			blockers: []Pending{{Reservation: "p1", Target: "a", Order: Order{Block: 9}}},
			held:     map[string]string{"x": HeldBlocked + ":p1"}, crowned: []string{"y"},
			events: map[string]kinds{"y": {KindCrown, KindStackTransition}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Candidates: tc.cands, Stack: tc.stack, StackDigest: mustDigest(t, tc.stack),
				Head: Head{Seq: 3, Digest: dg("head")}, Blockers: tc.blockers}
			p, err := Make(fakeCatalog{}, in)
			if err != nil {
				t.Fatal(err)
			}
			gotHeld := map[string]string{}
			for _, h := range p.Held {
				gotHeld[h.Reservation] = h.Reason
			}
			if tc.held == nil {
				tc.held = map[string]string{}
			}
			if fmt.Sprint(gotHeld) != fmt.Sprint(tc.held) {
				t.Errorf("held = %v\nwant %v", gotHeld, tc.held)
			}
			var crowned []string
			for _, c := range p.Crowns {
				crowned = append(crowned, c.Candidate.Reservation)
				var ks kinds
				for _, e := range c.Events {
					ks = append(ks, e.Kind)
				}
				if fmt.Sprint(ks) != fmt.Sprint(tc.events[c.Candidate.Reservation]) {
					t.Errorf("%s: events %v, want %v", c.Candidate.Reservation, ks, tc.events[c.Candidate.Reservation])
				}
				want := tc.super[c.Candidate.Reservation]
				if want == nil {
					want = []string{}
				}
				if !slices.Equal(c.Supersedes, want) {
					t.Errorf("%s: supersedes %v, want %v", c.Candidate.Reservation, c.Supersedes, want)
				}
			}
			if !slices.Equal(crowned, tc.crowned) {
				t.Errorf("crowned %v, want %v", crowned, tc.crowned)
			}
			checkPlan(t, in, p)
		})
	}
}

// checkPlan checks what every plan must satisfy: the events chain from the
// input head, each crown adds one generation, its stack digests right, the
// crowned entry names the CROWN event, the claim matches.
func checkPlan(t *testing.T, in Input, p Plan) {
	t.Helper()
	head, stack, sd := in.Head, in.Stack, in.StackDigest
	for _, c := range p.Crowns {
		for i, ev := range c.Events {
			if ev.Seq != head.Seq+1 || ev.Prev != head.Digest {
				t.Fatalf("event %d (%s) links to %d %q, want %d %q", ev.Seq, ev.Kind, ev.Seq-1, ev.Prev, head.Seq, head.Digest)
			}
			data, d, err := ev.Encode()
			if err != nil || d != c.Digests[i] || string(data) != string(c.Data[i]) {
				t.Fatalf("event %d: digest %s (%v), recorded %s", ev.Seq, d, err, c.Digests[i])
			}
			if want, _ := canon.Digest(DomainEvent, 1, ev); want != d {
				t.Fatalf("event %d: digest %s is not canon.Digest %s", ev.Seq, d, want)
			}
			if ev.Generation != stack.Generation+1 || ev.Reservation != c.Candidate.Reservation {
				t.Errorf("event %d: generation %d reservation %s", ev.Seq, ev.Generation, ev.Reservation)
			}
			if ev.Kind != KindStackTransition && ev.Stack != sd {
				t.Errorf("event %d names stack %s, want the incumbent %s", ev.Seq, ev.Stack, sd)
			}
			head = Head{Seq: ev.Seq, Digest: d}
		}
		first, last := c.Events[0], c.Events[len(c.Events)-1]
		if first.Kind != KindCrown || last.Kind != KindStackTransition || last.Stack != c.StackDigest {
			t.Errorf("crown %s: events %s…%s", c.Candidate.Reservation, first.Kind, last.Kind)
		}
		if c.Stack.Generation != stack.Generation+1 || mustDigest(t, c.Stack) != c.StackDigest {
			t.Errorf("crown %s: stack generation %d (from %d), digest", c.Candidate.Reservation, c.Stack.Generation, stack.Generation)
		}
		if e, ok := c.Stack.entry(c.Candidate.Target); !ok || e.Crown != c.Digests[0] || e.Reservation != c.Candidate.Reservation {
			t.Errorf("crown %s: stack entry %+v", c.Candidate.Reservation, e)
		}
		if err := c.Stack.Validate(); err != nil {
			t.Error(err)
		}
		if c.Claim.SpeedupPPM != c.Candidate.SpeedupPPM || c.Claim.CrownedBlock != c.Candidate.SubmitBlock || c.Claim.Hotkey != c.Candidate.Contributor {
			t.Errorf("claim %+v", c.Claim)
		}
		stack, sd = c.Stack, c.StackDigest
	}
	if p.Head != head || p.StackDigest != sd || p.Stack.Generation != stack.Generation {
		t.Errorf("plan head %+v stack %s, want %+v %s", p.Head, p.StackDigest, head, sd)
	}
	var recs []Record
	for _, c := range p.Crowns {
		for i, ev := range c.Events {
			recs = append(recs, Record{Seq: ev.Seq, Digest: c.Digests[i], Data: c.Data[i]})
		}
	}
	if len(recs) > 0 && recs[0].Seq == 1 {
		if h, err := Verify(recs); err != nil || h != p.Head {
			t.Errorf("Verify = %+v, %v", h, err)
		}
	}
}

func TestMakeRefuses(t *testing.T) {
	g := mustDigest(t, Genesis())
	good := cand("x", "a", g, 1_050_000, 10)
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{"stack digest", Input{Stack: Genesis(), StackDigest: dg("x")}, "stored digest"},
		{"head", Input{Stack: Genesis(), StackDigest: g, Head: Head{Seq: 1}}, "journal head"},
		{"twice", Input{Stack: Genesis(), StackDigest: g, Candidates: []Candidate{good, good}}, "listed twice"},
		{"speedup", Input{Stack: Genesis(), StackDigest: g, Candidates: []Candidate{cand("x", "a", g, PPM, 10)}}, "greater than"},
		{"same evidence", Input{Stack: Genesis(), StackDigest: g, Candidates: []Candidate{func() Candidate {
			c := good
			c.Evidence[1] = c.Evidence[0]
			return c
		}()}}, "independent"},
		{"unsorted stack", Input{Stack: Stack{Generation: 2, Entries: []Entry{stackAB().Entries[1], stackAB().Entries[0]}}}, "sorted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Make(fakeCatalog{}, tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// The real catalog: the atomic MoE epilogue neutralizes both singletons.
func TestMakeTargetCatalog(t *testing.T) {
	sc, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := target.NewCatalog(sc)
	if err != nil {
		t.Fatal(err)
	}
	var _ Catalog = cat
	members := cat.Displaces(target.MoEEpilogue)
	st := Stack{Generation: 2, Entries: []Entry{
		{Target: members[0], Proposal: dg("p0"), Contributor: "h0", Reservation: "r0", Crown: dg("c0")},
		{Target: members[1], Proposal: dg("p1"), Contributor: "h1", Reservation: "r1", Crown: dg("c1")},
	}}
	d := mustDigest(t, st)
	p, err := Make(cat, Input{Stack: st, StackDigest: d, Candidates: []Candidate{cand("x", target.MoEEpilogue, d, 1_100_000, 5)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Crowns) != 1 || len(p.Crowns[0].Events) != 4 || p.Crowns[0].Events[1].Kind != KindNeutralization ||
		len(p.Stack.Entries) != 1 || p.Stack.Entries[0].Target != target.MoEEpilogue || p.Stack.Generation != 3 {
		t.Fatalf("plan %+v", p)
	}
}

func TestSpeedupPPM(t *testing.T) {
	for _, tc := range []struct {
		in   canon.Decimal
		want int64
		err  bool
	}{
		{"1.07", 1_070_000, false},
		{"1.0000019", 1_000_001, false},
		{"2", 2_000_000, false},
		{"1.0000009", 0, true},
		{"1", 0, true},
		{"0.5", 0, true},
		{"1.50", 0, true}, // not canonical
	} {
		got, err := SpeedupPPM(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("SpeedupPPM(%s) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSettlementEvidence(t *testing.T) {
	g := mustDigest(t, Genesis())
	c := cand("x", "a", g, 1_050_000, 10)
	a := Attempt{Ref: c.Evidence[1], Proposal: c.Proposal, Target: "a", Incumbent: g, SpeedupPPM: 1_070_000}
	b := Attempt{Ref: c.Evidence[0], Proposal: c.Proposal, Target: "a", Incumbent: g, SpeedupPPM: 1_050_000}
	want, err := CandidateEvidence(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := AttemptsEvidence(a, b)
	if err != nil || string(got) != string(want) {
		t.Errorf("AttemptsEvidence = %s, %v\nwant %s", got, err, want)
	}
	b.Incumbent = dg("other")
	if _, err := AttemptsEvidence(a, b); err == nil {
		t.Error("attempts against different incumbents agreed")
	}
}

func TestDecodeStack(t *testing.T) {
	for _, st := range []Stack{Genesis(), stackAB()} {
		body, err := canon.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		got, d, err := DecodeStack(body)
		if err != nil || d != mustDigest(t, st) || got.Generation != st.Generation || len(got.Entries) != len(st.Entries) {
			t.Errorf("DecodeStack = %+v %s %v; want digest %s", got, d, err, mustDigest(t, st))
		}
		if _, _, err := DecodeStack(append([]byte(" "), body...)); err == nil {
			t.Error("a non-canonical body decoded")
		}
	}
}
