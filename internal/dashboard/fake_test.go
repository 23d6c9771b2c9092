package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// fake is a hand-written Source over values in memory. It is mutable
// (move, fail) so that tests can drive the live updates; every read
// returns a deep copy, as a store would.
type fake struct {
	mu          sync.Mutex
	head        uint64
	transitions uint64
	updated     time.Time
	subs        []SubmissionDetail // in queue order
	attempts    map[string]AttemptDetail
	stacks      []StackGeneration // newest first
	journal     JournalView
	weights     []WeightPublication // newest first
	evidence    map[string][]byte
	crowns      []CrownRecord
	err         error // when set, every read fails with it
}

// queueStates is the intake's order of states.
var queueStates = []string{"deferred", "reserved", "fetching", "transport_retry", "published", "screening", "promoted",
	"qualifying", "reproduction_pending", "no_decision", "held", "failed", "expired", "qualified"}

// hexOf is a digest-shaped id made from a name.
func hexOf(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

func refOf(domain, name string) string { return domain + ":" + hexOf(name) }

// hostile is text a miner controls, made to break out of HTML.
const hostile = `<script>alert("x")</script>"><svg onload=alert(1)>&amp;`

var t0 = time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)

// newFake is a validator with four submissions, three attempts, two
// crowns, three weight publications and a verified journal.
func newFake() *fake {
	f := &fake{head: 420, transitions: 23, updated: t0.Add(40 * time.Minute),
		attempts: map[string]AttemptDetail{}, evidence: map[string][]byte{}}
	alice, bob, carol, dave := hexOf("alice"), hexOf("bob"), hexOf("carol"), hexOf("dave")
	a1, a2, d1 := refOf("cacheon.referee.attempt", "a1"), refOf("cacheon.referee.attempt", "a2"), refOf("cacheon.referee.attempt", "d1")
	tl := func(min int, block uint64, step, from, to, reason, ref string) TimelineEvent {
		at := time.Time{}
		if min >= 0 {
			at = t0.Add(time.Duration(min) * time.Minute)
		}
		return TimelineEvent{At: at, Block: block, Step: step, From: from, To: to, Reason: reason, Ref: ref}
	}
	f.subs = []SubmissionDetail{
		{
			Submission: Submission{ID: alice, Block: 22, Index: 0, Hotkey: hexOf("hk-alice"), ContentHash: hexOf("c-alice"),
				URL: "https://example.org/alice.tar.gz", State: "qualified", Reason: "second independent PASS",
				Attempts: 2, Passes: 2, UpdatedBlock: 300, Outcome: "crowned"},
			Fingerprint: hexOf("fp-alice"),
			Timeline: []TimelineEvent{
				tl(-1, 20, "commit", "", "", "", ""),
				tl(-1, 22, "reveal", "", "", "", ""),
				tl(1, 24, "reservation", "", "reserved", "admitted", ""),
				tl(2, 25, "fetch", "reserved", "fetching", "fetch attempt 1", ""),
				tl(3, 26, "fetch", "fetching", "published", "hash checked", ""),
				tl(4, 27, "scan", "published", "screening", "scan passed", ""),
				tl(9, 30, "screen", "screening", "promoted", "screen passed", ""),
				tl(10, 31, "lease", "promoted", "qualifying", "lease to cpu0", ""),
				tl(20, 120, "attempt", "qualifying", "reproduction_pending", "PASS", a1),
				tl(21, 121, "lease", "reproduction_pending", "qualifying", "lease to cpu1", ""),
				tl(30, 300, "attempt", "qualifying", "qualified", "PASS", a2),
			},
			Attempts: []AttemptSummary{
				{Ref: a1, Number: 1, At: t0.Add(20 * time.Minute), Verdict: "PASS", Reason: "faster", Ratio: "1.0712"},
				{Ref: a2, Number: 2, At: t0.Add(30 * time.Minute), Verdict: "PASS", Reason: "faster", Ratio: "1.0700"},
			},
		},
		{
			Submission: Submission{ID: bob, Block: 23, Index: 0, Hotkey: hexOf("hk-bob"), ContentHash: hexOf("c-bob"),
				URL: "https://example.org/bob.tar.gz", State: "failed",
				Reason: "fetch: hash_mismatch: extract: content hash does not match the committed one", UpdatedBlock: 26},
			Timeline: []TimelineEvent{
				tl(-1, 23, "reveal", "", "", "", ""),
				tl(1, 24, "reservation", "", "reserved", "admitted", ""),
				tl(5, 26, "fetch", "reserved", "failed", "fetch: hash_mismatch", ""),
			},
		},
		{
			Submission: Submission{ID: carol, Block: 24, Index: 1, Hotkey: hexOf("hk-carol"), ContentHash: hexOf("c-carol"),
				URL: "javascript:alert(1)", State: "promoted", Reason: hostile, UpdatedBlock: 41},
			Fingerprint: hexOf("fp-carol"),
			Timeline: []TimelineEvent{
				tl(1, 24, "reservation", "", "reserved", hostile, ""),
				tl(12, 41, "screen", "screening", "promoted", "screen passed", ""),
			},
		},
		{
			Submission: Submission{ID: dave, Block: 30, Index: 2, Hotkey: hexOf("hk-dave"), ContentHash: hexOf("c-dave"),
				URL: "https://example.org/dave.tar.gz", State: "reproduction_pending", Reason: "first PASS",
				Attempts: 1, Passes: 1, UpdatedBlock: 390},
			Timeline: []TimelineEvent{tl(35, 390, "attempt", "qualifying", "reproduction_pending", "PASS", d1)},
			Attempts: []AttemptSummary{{Ref: d1, Number: 1, At: t0.Add(35 * time.Minute), Verdict: "PASS", Reason: "faster", Ratio: "1.1"}},
		},
	}
	read := func(role string, rates ...float64) Read {
		s := slices.Clone(rates)
		slices.Sort(s)
		return Read{Role: role, Rate: s[len(s)/2], WaveRates: rates, Evidence: refOf("cacheon.referee.read", role+fmt.Sprint(rates))}
	}
	f.attempts[a1] = AttemptDetail{
		Ref: a1, Reservation: alice, Number: 1, Target: "activation.silu_and_mul", At: t0.Add(20 * time.Minute),
		Reads: []Read{
			read("B", 1000.5, 1002.25, 998.75, 1001, 1000),
			read("C", 1071.125, 1073.5, 1070, 1072.25, 1071.75),
			read("B′", 999.5, 1001.5, 1000.25, 1000.75, 999.875),
		},
		Ratio: "1.0712", Drift: "0.00025", Bar: "1.01",
		Audit: Audit{Graded: 64, Failures: 0, Summary: "64 sampled calls regraded, none outside tolerance", Evidence: refOf("cacheon.referee.audit", "a1")},
		Quality: Quality{Verdict: "PASS", Evidence: refOf("cacheon.referee.scores", "a1"), Rows: []QualityRow{
			{Prompt: "16", Metric: "stock drift |mean(B′−B)|", Value: "0.0003", Limit: "0.002", Pass: true},
			{Prompt: "16", Metric: "regression C−(B+B′)/2 (lower bound)", Value: "-0.0011", Limit: "0.001", Pass: true},
		}},
		Verdict: "PASS", Reason: "faster", Detail: "r 1.0712 ≥ bar 1.01",
		Evidence: []EvidenceLink{{Name: "plan", Ref: refOf("cacheon.referee.plan", "a1")}, {Name: "audit", Ref: refOf("cacheon.referee.audit", "a1")}},
	}
	f.attempts[a2] = AttemptDetail{Ref: a2, Reservation: alice, Number: 2, Target: "activation.silu_and_mul", At: t0.Add(30 * time.Minute),
		Reads: []Read{read("B", 1000, 1001), read("C", 1070, 1070.5), read("B′", 1000.5, 1000.25)},
		Ratio: "1.07", Drift: "0.0004", Bar: "1.01", Verdict: "PASS", Reason: "faster", Quality: Quality{Verdict: "PASS"}}
	f.attempts[d1] = AttemptDetail{Ref: d1, Reservation: dave, Number: 1, Target: "norm.rmsnorm", Verdict: "PASS", Reason: "faster",
		Reads: []Read{read("B", 500), read("C", 550), read("B′", 500.5)}, Ratio: "1.1", Drift: "0.001", Bar: "1.01"}
	f.evidence[a1] = []byte(`{"domain":"cacheon.referee.attempt","payload":{"note":"` + `<script>alert(1)</script>` + `"},"schema_version":1}`)

	crown := func(seq uint64, target, who string, res string, ppm, block uint64) *Crown {
		return &Crown{Seq: seq, Digest: hexOf(fmt.Sprint("crown", seq)), Target: target, Proposal: hexOf("p-" + who),
			Contributor: hexOf("hk-" + who), Reservation: res, SpeedupPPM: ppm, Block: block, Evidence: []string{a1, a2}}
	}
	aliceEntry := StackEntry{Target: "activation.silu_and_mul", Proposal: hexOf("p-alice"), Contributor: hexOf("hk-alice"),
		Reservation: alice, CrownDigest: hexOf("crown1")}
	f.stacks = []StackGeneration{
		{Generation: 2, Digest: hexOf("stack2"), Crown: crown(3, "norm.rmsnorm", "erin", hexOf("erin"), 1_234_567, 200),
			Entries: []StackEntry{aliceEntry, {Target: "norm.rmsnorm", Proposal: hexOf("p-erin"), Contributor: hexOf("hk-erin"),
				Reservation: hexOf("erin"), CrownDigest: hexOf("crown3")}}},
		{Generation: 1, Digest: hexOf("stack1"), Crown: crown(1, "activation.silu_and_mul", "alice", alice, 1_070_000, 22),
			Entries: []StackEntry{aliceEntry}},
		{Generation: 0, Digest: hexOf("stack0")},
	}
	f.crowns = []CrownRecord{{Seq: 1, Reservation: alice, Target: "activation.silu_and_mul", Generation: 1, Speedup: "1.07",
		Contributor: hexOf("hk-alice"), Digest: hexOf("crown1"),
		Record: json.RawMessage(`{"domain":"cacheon.crown","payload":{"note":"<script>alert(1)</script>"},"schema_version":1}`)}}
	f.journal = JournalView{Verified: true, Entries: []JournalEntry{
		{Seq: 1, Digest: hexOf("crown1"), Kind: "CROWN", Reservation: alice, Target: "activation.silu_and_mul", Summary: "speedup 1.0700"},
		{Seq: 2, Digest: hexOf("j2"), Prev: hexOf("crown1"), Kind: "STACK_TRANSITION", Summary: "generation 1"},
		{Seq: 3, Digest: hexOf("crown3"), Prev: hexOf("j2"), Kind: "CROWN", Reservation: hexOf("erin"), Target: "norm.rmsnorm", Summary: "speedup 1.2345"},
		{Seq: 4, Digest: hexOf("j4"), Prev: hexOf("crown3"), Kind: "STACK_TRANSITION", Summary: "generation 2"},
	}}
	f.weights = []WeightPublication{
		{ID: "3", Block: 400, State: "pending", Vector: []WeightEntry{{UID: 3, Hotkey: hexOf("hk-alice"), PPM: 400_000}, {UID: 5, Hotkey: hexOf("hk-erin"), PPM: 600_000}}},
		{ID: "2", Block: 300, State: "confirmed", Vector: []WeightEntry{{UID: 3, Hotkey: hexOf("hk-alice"), PPM: 1_000_000}}},
		{ID: "1", Block: 100, State: "held", Reason: "deadline_passed: not shown by block 150", Burn: true,
			Vector: []WeightEntry{{UID: 0, Hotkey: hexOf("burn"), PPM: 1_000_000}}},
	}
	return f
}

func (f *fake) lock() error {
	f.mu.Lock()
	return f.err
}

func (f *fake) Overview(ctx context.Context) (Overview, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return Overview{}, err
	}
	defer f.mu.Unlock()
	o := Overview{Head: f.head, Transitions: f.transitions, Updated: f.updated,
		Stack:  StackHead{Generation: f.stacks[0].Generation, Digest: f.stacks[0].Digest},
		Crowns: 0}
	for _, st := range queueStates {
		n := 0
		for _, s := range f.subs {
			if s.Submission.State == st {
				n++
			}
		}
		o.Queue = append(o.Queue, StateCount{State: st, Count: n})
	}
	if n := len(f.journal.Entries); n > 0 {
		last := f.journal.Entries[n-1]
		o.Journal = JournalHead{Seq: last.Seq, Digest: last.Digest}
	}
	o.Journal.Verified, o.Journal.Error = f.journal.Verified, f.journal.Error
	for _, e := range f.journal.Entries {
		if e.Kind == "CROWN" {
			o.Crowns++
		}
	}
	if len(f.weights) > 0 {
		w := clone(f.weights[0])
		o.Weights = &w
	}
	return o, nil
}

func (f *fake) Submissions(ctx context.Context) ([]Submission, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return nil, err
	}
	defer f.mu.Unlock()
	var out []Submission
	for _, s := range f.subs {
		out = append(out, s.Submission)
	}
	return out, nil
}

func (f *fake) Submission(ctx context.Context, id string) (SubmissionDetail, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return SubmissionDetail{}, err
	}
	defer f.mu.Unlock()
	for _, s := range f.subs {
		if s.Submission.ID == id {
			return clone(s), nil
		}
	}
	return SubmissionDetail{}, fmt.Errorf("reservation %s: %w", id, ErrNotFound)
}

func (f *fake) Attempt(ctx context.Context, ref string) (AttemptDetail, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return AttemptDetail{}, err
	}
	defer f.mu.Unlock()
	a, ok := f.attempts[ref]
	if !ok {
		return AttemptDetail{}, fmt.Errorf("attempt %s: %w", ref, ErrNotFound)
	}
	return clone(a), nil
}

func (f *fake) Stacks(ctx context.Context) ([]StackGeneration, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return nil, err
	}
	defer f.mu.Unlock()
	return clone(f.stacks), nil
}

func (f *fake) Journal(ctx context.Context) (JournalView, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return JournalView{}, err
	}
	defer f.mu.Unlock()
	return clone(f.journal), nil
}

func (f *fake) Weights(ctx context.Context) ([]WeightPublication, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return nil, err
	}
	defer f.mu.Unlock()
	return clone(f.weights), nil
}

func (f *fake) Evidence(ctx context.Context, ref string) ([]byte, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return nil, err
	}
	defer f.mu.Unlock()
	b, ok := f.evidence[ref]
	if !ok {
		return nil, fmt.Errorf("evidence %s: %w", ref, ErrNotFound)
	}
	return slices.Clone(b), nil
}

func (f *fake) CrownRecords(ctx context.Context) ([]CrownRecord, error) {
	if err := f.lock(); err != nil {
		defer f.mu.Unlock()
		return nil, err
	}
	defer f.mu.Unlock()
	return clone(f.crowns), nil
}

// move takes reservation id to state to, as a store transition would:
// one timeline event, one more transition, the head a block further.
func (f *fake) move(id, to, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.head++
	f.transitions++
	f.updated = f.updated.Add(time.Minute)
	for i := range f.subs {
		s := &f.subs[i]
		if s.Submission.ID != id {
			continue
		}
		s.Timeline = append(s.Timeline, TimelineEvent{At: f.updated, Block: f.head, Step: "lease",
			From: s.Submission.State, To: to, Reason: reason})
		s.Submission.State, s.Submission.Reason, s.Submission.UpdatedBlock = to, reason, f.head
		return
	}
	panic("fake: no reservation " + id)
}

// fail makes every read fail with err (nil: work again).
func (f *fake) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// clone is a deep copy (through JSON, as the data would travel).
func clone[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
