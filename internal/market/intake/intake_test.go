package intake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"cacheon/internal/market/chain"
	"cacheon/internal/store"
)

func TestAdmission(t *testing.T) { testAdmission(t, openSQLite) }

func testAdmission(t *testing.T, open opener) {
	ctx := context.Background()
	f := newFixtureOn(t, Config{HotkeyCap: 2, PendingCap: 3, EpochBlocks: 100}, open(t))
	c := f.chain
	bad := c.add(10, 0, "hkA", "x")
	bad.URL = "ftp://nope/x"
	c.reveals[0] = bad
	a1 := c.add(10, 1, "hkA", "a1")
	a2 := c.add(11, 0, "hkA", "a2")
	a3 := c.add(11, 1, "hkA", "a3")      // over hkA's cap of 2 (the invalid one does not count)
	b1 := c.add(12, 0, "hkB", "b1")      // pending queue full (a1, a2, b1 = 3)? no: a1, a2 then b1 = 3rd
	b2 := c.add(12, 1, "hkB", "b2")      // deferred: queue at 3
	c1 := c.add(13, 0, "hkC", "c1")      // deferred: behind b2
	late := c.add(200, 0, "hkA", "late") // after the head: not yet
	n, err := f.in.Poll(ctx)
	if err != nil || n != 7 {
		t.Fatalf("Poll = %d, %v; want 7", n, err)
	}
	want := []struct {
		rv     chain.Reveal
		state  State
		reason string
	}{
		{bad, Failed, "invalid: "},
		{a1, Reserved, ""},
		{a2, Reserved, ""},
		{a3, Failed, "hotkey_cap: 2 reservations already in epoch 0"},
		{b1, Reserved, ""},
		{b2, Deferred, "pending queue full (3/3)"},
		{c1, Deferred, "behind earlier deferred arrivals"},
	}
	for _, w := range want {
		r := f.get(t, w.rv)
		if State(r.State) != w.state || !strings.HasPrefix(r.Reason, w.reason) {
			t.Errorf("%s: %s %q, want %s %q…", w.rv.URL, r.State, r.Reason, w.state, w.reason)
		}
	}
	f.st.View(ctx, func(tx store.Tx) error {
		if p, _ := tx.Cursor(ctx); p != (store.Position{Block: 13}) {
			t.Errorf("cursor = %+v, want 13/0", p)
		}
		return nil
	})
	// Polling again records nothing twice.
	if n, err := f.in.Poll(ctx); err != nil || n != 0 {
		t.Fatalf("second Poll = %d, %v", n, err)
	}
	// Freeing capacity promotes the deferred ones oldest first.
	f.drain(t)
	if err := f.in.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	for _, rv := range []chain.Reveal{b2, c1} {
		if r := f.get(t, rv); State(r.State) != Reserved {
			t.Errorf("%s after Tick: %s, want reserved", rv.URL, r.State)
		}
	}
	f.chain.head = 300
	if n, err := f.in.Poll(ctx); err != nil || n != 1 {
		t.Fatalf("Poll after the head moved = %d, %v", n, err)
	}
	if r := f.get(t, late); State(r.State) != Reserved {
		t.Errorf("late: %s (epoch 2 has its own cap)", r.State)
	}
	checkJournal(t, f.st)
}

func TestAdmissionBatchesKeepOrder(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{Batch: 3, PendingCap: 4, HotkeyCap: 100})
	var rvs []chain.Reveal
	for i := 0; i < 10; i++ {
		rvs = append(rvs, f.chain.add(uint64(5+i/2), uint32(i%2), "hk", "p"+string(rune('a'+i))))
	}
	if n, err := f.in.Poll(ctx); err != nil || n != 10 {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	for i, rv := range rvs {
		want := Reserved
		if i >= 4 {
			want = Deferred
		}
		if r := f.get(t, rv); State(r.State) != want {
			t.Errorf("reveal %d: %s, want %s", i, r.State, want)
		}
	}
}

func TestPipeline(t *testing.T) { testPipeline(t, openSQLite) }

func testPipeline(t *testing.T, open opener) {
	ctx := context.Background()
	f := newFixtureOn(t, Config{HotkeyCap: 100, FetchAttempts: 2}, open(t))
	c := f.chain
	cases := []struct {
		rv     chain.Reveal
		state  State
		reason string
		failed bool
	}{
		{c.add(10, 0, "hkA", "good_1"), Promoted, "screen passed", false},
		{c.add(10, 1, "hkB", "good_1"), Failed, "copy_of:", false},        // same content hash, another hotkey
		{c.add(10, 2, "hkB", "good_2"), Failed, "copy_of:", false},        // same fingerprint, another hotkey
		{c.add(10, 3, "hkA", "good_3"), Promoted, "screen passed", false}, // same fingerprint, same hotkey
		{c.add(11, 0, "hkC", "evil"), Failed, "scan: forbidden", true},
		{c.add(11, 1, "hkC", "evil"), Failed, "known_failure:", true}, // same bundle, same arena
		{c.add(11, 2, "hkD", "wrong"), Failed, "screen: rmsnorm", true},
		{c.add(12, 0, "hkD", "flaky"), Promoted, "screen passed", false},
		{c.add(12, 1, "hkD", "down"), Failed, "fetch: 2 attempts", false},
		{c.add(12, 2, "hkE", "gone"), Failed, "fetch: HTTP 404", false},
	}
	if _, err := f.in.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	f.drain(t)
	first := f.get(t, cases[0].rv)
	for i, tc := range cases {
		r := f.get(t, tc.rv)
		if State(r.State) != tc.state || !strings.HasPrefix(r.Reason, tc.reason) || r.BundleFailed != tc.failed {
			t.Errorf("case %d (%s): %s %q failed=%v; want %s %q… failed=%v", i, tc.rv.URL, r.State, r.Reason, r.BundleFailed, tc.state, tc.reason, tc.failed)
		}
	}
	for _, i := range []int{1, 2} {
		if r := f.get(t, cases[i].rv); !strings.HasPrefix(r.Reason, "copy_of:"+first.ID) {
			t.Errorf("case %d: %q does not name the earlier reservation %s", i, r.Reason, first.ID)
		}
	}
	if r := f.get(t, cases[5].rv); !strings.Contains(r.Reason, f.get(t, cases[4].rv).ID) {
		t.Errorf("known failure %q does not name the earlier failure", r.Reason)
	}
	checkJournal(t, f.st)
	// The flaky one went through transport_retry.
	var retried bool
	for _, e := range f.events(t) {
		if e.Reservation == f.get(t, cases[7].rv).ID && e.To == string(TransportRetry) {
			retried = true
		}
	}
	if !retried {
		t.Error("flaky fetch never went through transport_retry")
	}
}

func TestSLA(t *testing.T) { testSLA(t, openSQLite) }

func testSLA(t *testing.T, open opener) {
	ctx := context.Background()
	f := newFixtureOn(t, Config{SLABlocks: 50, PendingCap: 1, HotkeyCap: 10}, open(t))
	old := f.chain.add(10, 0, "hk", "p1")
	oldDeferred := f.chain.add(10, 1, "hk", "p2")
	fresh := f.chain.add(90, 0, "hk", "p3")
	if _, err := f.in.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.in.Tick(ctx); err != nil { // head 100: 10+50 < 100
		t.Fatal(err)
	}
	for rv, want := range map[chain.Reveal]State{old: Expired, oldDeferred: Expired, fresh: Reserved} {
		if r := f.get(t, rv); State(r.State) != want {
			t.Errorf("%s: %s %q, want %s", rv.URL, r.State, r.Reason, want)
		}
	}
	checkJournal(t, f.st)
}

// promoteAll admits and processes n good reveals; it returns them.
func promoteAll(t *testing.T, f *fixture, n int) []chain.Reveal {
	t.Helper()
	var rvs []chain.Reveal
	for i := 0; i < n; i++ {
		rvs = append(rvs, f.chain.add(uint64(10+i), 0, "hk"+string(rune('A'+i)), "ok"+string(rune('a'+i))))
	}
	if _, err := f.in.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.drain(t)
	return rvs
}

func TestLeases(t *testing.T) { testLeases(t, openSQLite) }

func testLeases(t *testing.T, open opener) {
	ctx := context.Background()
	f := newFixtureOn(t, Config{QualifyRetries: 2}, open(t))
	rvs := promoteAll(t, f, 3)
	in := f.in
	l1, ok, err := in.Lease(ctx, "g0", "w1", time.Minute)
	if err != nil || !ok || l1.Reservation.ID != f.get(t, rvs[0]).ID || l1.Reproduction {
		t.Fatalf("first lease = %+v %v %v", l1, ok, err)
	}
	if _, ok, err := in.Lease(ctx, "g0", "w2", time.Minute); err != nil || ok {
		t.Fatalf("second lease on g0 = %v %v, want busy", ok, err)
	}
	l2, ok, err := in.Lease(ctx, "g1", "w2", time.Minute)
	if err != nil || !ok || l2.Reservation.ID != f.get(t, rvs[1]).ID {
		t.Fatalf("lease on g1 = %+v %v %v", l2, ok, err)
	}
	// First PASS: reproduction pending, and the reproduction goes first.
	if s, err := in.Complete(ctx, l1, VerdictPass, "r=1.08"); err != nil || s != ReproductionPending {
		t.Fatalf("Complete PASS = %s %v", s, err)
	}
	if _, err := in.Complete(ctx, l1, VerdictPass, ""); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("completing twice: err = %v, want ErrLeaseLost", err)
	}
	l3, ok, err := in.Lease(ctx, "g0", "w1", time.Minute)
	if err != nil || !ok || l3.Reservation.ID != l1.Reservation.ID || !l3.Reproduction {
		t.Fatalf("after a PASS the reproduction goes before new work: %+v %v %v", l3.Reservation.ID, ok, err)
	}
	// Heartbeats keep a lease; without them it expires and the work
	// returns to the queue without counting an attempt.
	f.clock.t = f.clock.t.Add(50 * time.Second)
	if l3, err = in.Heartbeat(ctx, l3, time.Minute); err != nil {
		t.Fatal(err)
	}
	f.clock.t = f.clock.t.Add(50 * time.Second) // l2 expired, l3 not
	if _, err := in.Heartbeat(ctx, l2, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("heartbeat of an expired lease: %v, want ErrLeaseLost", err)
	}
	if n, err := in.Reap(ctx); err != nil || n != 1 {
		t.Fatalf("Reap = %d %v", n, err)
	}
	if r := f.get(t, rvs[1]); State(r.State) != Promoted || r.Attempts != 0 {
		t.Errorf("after expiry: %s attempts %d, want promoted 0", r.State, r.Attempts)
	}
	if s, err := in.Complete(ctx, l3, VerdictPass, ""); err != nil || s != Qualified {
		t.Fatalf("second PASS = %s %v", s, err)
	}
	// NO_DECISION twice (budget 2) holds it; the operator requeues it.
	l4, _, _ := in.Lease(ctx, "g0", "w1", time.Minute)
	if s, _ := in.Complete(ctx, l4, VerdictNoDecision, "GPU fell off the bus"); s != NoDecision {
		t.Errorf("first NO_DECISION -> %s", s)
	}
	l5, _, _ := in.Lease(ctx, "g0", "w1", time.Minute)
	if l5.Reservation.ID != l4.Reservation.ID {
		t.Errorf("retry after NO_DECISION goes before new work: got %s", l5.Reservation.ID)
	}
	if s, _ := in.Complete(ctx, l5, VerdictNoDecision, ""); s != Held {
		t.Errorf("second NO_DECISION -> %s, want held", s)
	}
	if err := in.Release(ctx, l5.Reservation.ID, Reserved, "device replaced"); err != nil {
		t.Fatal(err)
	}
	l6, _, _ := in.Lease(ctx, "g0", "w1", time.Minute)
	if s, _ := in.Complete(ctx, l6, VerdictFail, "slower"); s != Failed {
		t.Errorf("FAIL -> %s", s)
	}
	if r := f.get(t, rvs[2]); State(r.State) != Failed || !r.BundleFailed || !strings.HasPrefix(r.Reason, "qualify: attempt 1: FAIL: slower") {
		t.Errorf("after FAIL: %s %q %v", r.State, r.Reason, r.BundleFailed)
	}
	checkJournal(t, f.st)
}

func TestResume(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Config{FetchAttempts: 2})
	rv := f.chain.add(10, 0, "hk", "ok")
	f.in.Poll(ctx)
	// Leave it fetching, as a crash would.
	stop := errors.New("crash")
	f.in.cfg.Failpoint = func(name string) {
		if name == "fetch:begun" {
			panic(stop)
		}
	}
	func() {
		defer func() { recover() }()
		f.in.Process(ctx)
	}()
	f.in.cfg.Failpoint = func(string) {}
	if r := f.get(t, rv); State(r.State) != Fetching {
		t.Fatalf("state %s, want fetching", r.State)
	}
	if n, err := f.in.Resume(ctx); err != nil || n != 1 {
		t.Fatalf("Resume = %d %v", n, err)
	}
	if r := f.get(t, rv); State(r.State) != TransportRetry {
		t.Fatalf("after Resume: %s", r.State)
	}
	f.drain(t)
	if r := f.get(t, rv); State(r.State) != Promoted {
		t.Fatalf("after drain: %s %q", r.State, r.Reason)
	}
	checkJournal(t, f.st)
}

func TestReservationIDIsTheArrival(t *testing.T) {
	rv := chain.Reveal{Pos: chain.Position{Block: 1, Index: 2}, Hotkey: "hk", ContentHash: hashOf("x"), URL: "https://a/x", CommitBlock: 0, Extrinsic: "e"}
	id, err := ReservationID(rv)
	if err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(*chain.Reveal){
		func(r *chain.Reveal) { r.Pos.Index++ },
		func(r *chain.Reveal) { r.Hotkey = "hk2" },
		func(r *chain.Reveal) { r.URL += "y" },
		func(r *chain.Reveal) { r.Extrinsic = "f" },
	} {
		r2 := rv
		change(&r2)
		if id2, _ := ReservationID(r2); id2 == id {
			t.Errorf("%+v and %+v share an id", rv, r2)
		}
	}
	if id2, _ := ReservationID(rv); id2 != id {
		t.Error("the id is not deterministic")
	}
}

// FuzzCheckReveal: no reveal, however hostile, panics admission's checks
// or the reservation id; an accepted one is a valid on-chain payload.
func FuzzCheckReveal(f *testing.F) {
	f.Add("hk", hashOf("x"), "https://a.example/x.tar.gz", uint64(3), uint32(1))
	f.Add("", "zz", "ftp://x", uint64(0), uint32(0))
	f.Add("h\xff", hashOf("y"), "http://[::1]:99999/", uint64(1)<<62, ^uint32(0))
	f.Fuzz(func(t *testing.T, hotkey, hash, url string, block uint64, idx uint32) {
		block &= 1<<63 - 1 // block numbers are int64 in the store and in canonical JSON
		rv := chain.Reveal{Pos: chain.Position{Block: block, Index: idx}, Hotkey: hotkey, ContentHash: hash, URL: url}
		if _, err := ReservationID(rv); err != nil {
			t.Fatalf("ReservationID: %v", err)
		}
		if CheckReveal(rv) != nil {
			return
		}
		b, err := chain.EncodePayload(hash, url)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := chain.ParsePayload(b); err != nil || p.H != hash || p.U != url {
			t.Fatalf("accepted reveal does not round-trip: %v", err)
		}
	})
}

// TestDocsTable: docs/market.md's transition table is Transitions().
func TestDocsTable(t *testing.T) {
	b, err := os.ReadFile("../../../docs/market.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, "<!-- transitions:begin -->"), strings.Index(doc, "<!-- transitions:end -->")
	if i < 0 || j < i {
		t.Fatal("docs/market.md: no transitions table markers")
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(doc[i:j], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "from" {
			continue
		}
		from := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if from == "(arrival)" {
			from = ""
		}
		documented[fmt.Sprintf("%s>%s>%s", from, strings.Trim(strings.TrimSpace(cells[2]), "`"), strings.TrimSpace(cells[3]))] = true
	}
	inCode := map[string]bool{}
	for _, tr := range Transitions() {
		inCode[fmt.Sprintf("%s>%s>%s", tr.From, tr.To, tr.By)] = true
	}
	for k := range inCode {
		if !documented[k] {
			t.Errorf("transition %s is in the code but not in docs/market.md", k)
		}
	}
	for k := range documented {
		if !inCode[k] {
			t.Errorf("transition %s is in docs/market.md but not in the code", k)
		}
	}
}
