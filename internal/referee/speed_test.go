package referee

import (
	"context"
	"errors"
	"testing"

	"cacheon/internal/canon"
	"cacheon/internal/engine"
	"cacheon/internal/fault"
)

// read is a read whose every wave generated tokens in nanos.
func read(tokens, nanos int64, waves int) []Wave {
	out := make([]Wave, waves)
	for i := range out {
		out[i] = Wave{Tokens: tokens, Nanos: nanos}
	}
	return out
}

func TestScoredRate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		waves []Wave
		want  string
	}{
		{"odd count takes the middle wave", []Wave{{100, 1e9}, {300, 1e9}, {200, 1e9}}, "200"},
		{"even count takes the mean of the middle two", []Wave{{100, 1e9}, {400, 1e9}, {200, 1e9}, {300, 1e9}}, "250"},
		{"exact, not floating", []Wave{{1, 3e9}}, "0.333333333"},
	} {
		r, err := ScoredRate(tc.waves)
		if err != nil || dec(r) != canon.Decimal(tc.want) {
			t.Errorf("%s: %v %v, want %s", tc.name, dec(r), err, tc.want)
		}
	}
	for _, bad := range [][]Wave{nil, {{0, 1}}, {{1, 0}}, {{-1, 5}}} {
		if _, err := ScoredRate(bad); err == nil {
			t.Errorf("ScoredRate(%v) accepted", bad)
		}
	}
}

// TestSpeedRuleBoundaries: drift exactly n still decides; r exactly on the
// bar passes; one token less fails; the bar follows k·s when that exceeds m.
func TestSpeedRuleBoundaries(t *testing.T) {
	rule := SpeedRule{N: "0.02", M: "0.01", K: "2"}
	for _, tc := range []struct {
		name      string
		b, c, bp  []Wave
		want      Outcome
		reason    Reason
		ratio, br string
	}{
		// B = 1000, B′ = 1000: s = 0, bar = 1.01.
		{"on the bar", read(1000, 1e9, 5), read(1010, 1e9, 5), read(1000, 1e9, 5), Pass, "", "1.01", "1.01"},
		{"just under the bar", read(1000, 1e9, 5), read(1009, 1e9, 5), read(1000, 1e9, 5), Fail, ReasonNotFaster, "1.009", "1.01"},
		// B = 990, B′ = 1010: s = 20/1000 = 0.02 = n exactly → decides;
		// bar = 1 + max(0.01, 2·0.02) = 1.04 over max(B, B′) = 1010.
		{"drift exactly n decides", read(990, 1e9, 3), read(10504, 1e10, 3), read(1010, 1e9, 3), Pass, "", "1.04", "1.04"},
		{"drift exactly n, below the drift bar", read(990, 1e9, 3), read(1050, 1e9, 3), read(1010, 1e9, 3), Fail, ReasonNotFaster, "1.03960396", "1.04"},
		// B = 989, B′ = 1011: s = 22/1000 > n.
		{"drift above n", read(989, 1e9, 3), read(5000, 1e9, 3), read(1011, 1e9, 3), NoDecision, ReasonDrift, "4.945598417", "1.044"},
		{"slower candidate", read(1000, 1e9, 3), read(900, 1e9, 3), read(1000, 1e9, 3), Fail, ReasonNotFaster, "0.9", "1.01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := rule.Decide(tc.b, tc.c, tc.bp)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict.Outcome != tc.want || res.Verdict.Reason != tc.reason {
				t.Fatalf("verdict %v, want %s %s", res.Verdict, tc.want, tc.reason)
			}
			if res.Ratio != canon.Decimal(tc.ratio) || res.Bar != canon.Decimal(tc.br) {
				t.Fatalf("r = %s, bar = %s; want %s, %s", res.Ratio, res.Bar, tc.ratio, tc.br)
			}
		})
	}
	if _, err := (SpeedRule{N: "x", M: "0", K: "0"}).Decide(read(1, 1, 1), read(1, 1, 1), read(1, 1, 1)); err == nil {
		t.Error("a rule with a bad constant decided")
	}
	if _, err := (SpeedRule{N: "-0.1", M: "0", K: "0"}).Decide(read(1, 1, 1), read(1, 1, 1), read(1, 1, 1)); err == nil {
		t.Error("a rule with a negative constant decided")
	}
}

// TestReasons: every reason ends as its table says, and attribution makes
// only the candidate's own faults a FAIL.
func TestReasons(t *testing.T) {
	fails := []Reason{ReasonScan, ReasonVerify, ReasonGraphCapture, ReasonCandidateErr, ReasonAudit, ReasonNeverFired, ReasonQuality, ReasonNotFaster, ReasonStarvedEngine, ReasonCandidateEngine}
	for r, o := range Reasons() {
		want := NoDecision
		for _, f := range fails {
			if f == r {
				want = Fail
			}
		}
		if o != want {
			t.Errorf("%s ends %s, want %s", r, o, want)
		}
		if v := Because(r, "x"); v.Outcome != o || v.Reason != r {
			t.Errorf("Because(%s) = %v", r, v)
		}
	}
	if v := Because("made_up", "x"); v.Outcome != NoDecision || v.Reason != ReasonInfrastructure {
		t.Errorf("an unknown reason became %v", v)
	}
	base := errors.New("boom")
	for _, tc := range []struct {
		err    error
		want   Outcome
		reason Reason
	}{
		{fault.CandidateErr(base), Fail, ReasonCandidateErr},
		{fault.InfraErr(base), NoDecision, ReasonInfrastructure},
		{base, NoDecision, ReasonInfrastructure},
		// an engine with the candidate failed in its own steps: undecided
		// until the incumbent is read (Referee.blame)
		{fault.InfraErr(&engine.CandidateRanError{Err: base}), NoDecision, ReasonEngineCrash},
	} {
		if v := Attribute(tc.err, ReasonCandidateErr, "C"); v.Outcome != tc.want || v.Reason != tc.reason {
			t.Errorf("Attribute(%v) = %v, want %s %s", tc.err, v, tc.want, tc.reason)
		}
	}
	// an engine crash of a run that was itself stopped is no crash: blame
	// reads nothing (no incumbent here) and says infrastructure
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	crash := Because(ReasonEngineCrash, "C read: generate: context canceled")
	if v := (&Referee{}).blame(stopped, "C", crash, nil); v.Outcome != NoDecision || v.Reason != ReasonInfrastructure {
		t.Errorf("blame after the run stopped = %v, want NO_DECISION infrastructure", v)
	}
}
