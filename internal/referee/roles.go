package referee

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sort"

	"cacheon/internal/arena"
	"cacheon/internal/engine"
	"cacheon/internal/evidence"
)

// audit is role A: a fresh engine with the candidate, run as C ran (CUDA
// graphs where the arena captures them, its settling read first), dumps
// calls sampled at positions
// drawn from the attempt's secret over the whole run; calls replayed from
// a graph are dumped through copies captured beside them. Go regrades
// every dump with the grader verify uses. Any violation is a FAIL; so is
// an audit that found fewer than MinAudited calls of the target (the
// candidate must fire where it is graded, too).
func (r *Referee) audit(ctx context.Context, st *attemptState, candCfg engine.Config) Verdict {
	cfg := candCfg
	graphs := auditGraphs(st.p.Arena)
	cfg.Graphs = engine.GraphsOff
	mode := "eager"
	if graphs {
		cfg.Graphs, mode = engine.GraphsOn, "graphs, replayed calls dumped"
	}
	// No share or every rule in the runtime: A dumps exactly the positions
	// drawn below (auditPositions), so that every dump is one the record
	// names and none is spent on the first calls of the load.
	cfg.Audit = &engine.Audit{Share: "0", MaxDumps: r.AuditMax, Graph: graphs}
	r.say("A: loading the audit engine (%s)", mode)
	s, err := r.Open(ctx, cfg)
	if err != nil {
		return Attribute(err, ReasonCandidateErr, "audit engine")
	}
	defer func() { _ = s.Close() }()
	// A serves C's settling read first, so that its timed waves are the
	// process's calls at the counts C's timed waves were: a kernel that
	// turns wrong after its M-th call in a process and was wrong in C's
	// timed read is wrong in A's (rt47c: without it A's drawn calls all
	// came before call 400, C's timed ones after).
	if v := r.settle(ctx, "A", s, false); v.Outcome != "" {
		return v
	}
	// The calls to dump are drawn once the warm-up has run, over the timed
	// waves about to run: as many as C's timed waves selected of each slot
	// (the same workload), the last of them always among them.
	rec := AuditRecord{Graphs: graphs}
	positions := func(before map[string]engine.SlotCounters) (map[string][]int, error) {
		p, err := auditPositions(st.secret, st.p.slots(), st.reads["C"].TimedSlots, before, r.AuditShare, r.AuditMax, r.MinAudited)
		rec.Positions = p
		return p, err
	}
	res, err := s.Bench(ctx, engine.BenchOptions{Waves: r.Waves, Warmup: r.Warmup, WaveTimeout: r.WaveTime, Progress: r.Progress,
		AuditPositions: positions})
	if err != nil {
		return Attribute(err, ReasonCandidateErr, "audit run")
	}
	rec.Selected = map[string]int64{}
	for _, slot := range st.p.slots() {
		rec.Selected[slot] = res.TimedSlots[slot].Selected
	}
	results, err := s.Regrade(r.Slots, "")
	if err != nil {
		return Because(ReasonInfrastructure, "audit regrade: %v", err)
	}
	for _, a := range results {
		rec.Dumps = append(rec.Dumps, AuditDump{Slot: a.Slot, Call: a.Call, Outcome: a.Outcome, Reason: a.Reason})
	}
	ref, err := r.Store.Put(DomainAudit, rec)
	if err != nil {
		return Because(ReasonInfrastructure, "seal audit: %v", err)
	}
	st.rec.Audit = &ref
	return auditVerdict(rec, st.p.slots(), r.MinAudited)
}

// auditGraphs reports whether A runs CUDA graphs: where the arena's
// engine captures them (C's timed reads replay them), so that a kernel
// that behaves one way when captured and another when called eagerly
// shows A what C ran.
func auditGraphs(a *arena.Arena) bool {
	return a.Engine.Graphs && a.Device == "cuda"
}

// auditVerdict decides A from its sealed record: every dump passes and
// each of the proposal's slots has at least minAudited of them.
func auditVerdict(rec AuditRecord, slots []string, minAudited int) Verdict {
	n := map[string]int{}
	dumped := map[string]map[int]bool{}
	for _, d := range rec.Dumps {
		if d.Outcome != engine.AuditPass {
			return Because(ReasonAudit, "%s call %d: %s", d.Slot, d.Call, d.Reason)
		}
		n[d.Slot]++
		if dumped[d.Slot] == nil {
			dumped[d.Slot] = map[int]bool{}
		}
		dumped[d.Slot][d.Call] = true
	}
	for _, s := range slots {
		if n[s] < minAudited {
			return Because(ReasonNeverFired, "the audit graded %d call(s) of %s, fewer than %d", n[s], s, minAudited)
		}
	}
	// Every drawn position was dumped: A's timed waves reached it, the
	// candidate was selected there, and nothing kept the dump from being
	// written.
	for _, s := range slices.Sorted(maps.Keys(rec.Positions)) {
		for _, c := range rec.Positions[s] {
			if !dumped[s][c] {
				return Because(ReasonAudit, "%s call %d was drawn for the audit and not dumped (%d of %d drawn calls were; "+
					"A's timed waves selected the candidate %d times)", s, c, countDumped(dumped[s], rec.Positions[s]), len(rec.Positions[s]), rec.Selected[s])
			}
		}
	}
	return Verdict{}
}

func countDumped(dumped map[int]bool, positions []int) int {
	n := 0
	for _, c := range positions {
		if dumped[c] {
			n++
		}
	}
	return n
}

// quality is role T: after the reads are sealed, the secret is revealed
// and ranks the requests; a pristine engine (stock stack, no contribution)
// teacher-forces the first TPrompts of B's, C's and B′'s trajectories.
// When the incumbent is the stock stack, the resident incumbent engine is
// that pristine engine (same stack, and no candidate process is alive by
// now: C and A have ended), so T scores on it instead of loading a third
// engine; scoring is eager prefill in either case.
func (r *Referee) quality(ctx context.Context, st *attemptState, base engine.Config, inc Session, qr QualityRule, speed SpeedResult) Verdict {
	sets := map[string]TrajectorySet{}
	for _, role := range []string{"B", "C", "B′"} {
		set, err := sealTrajectories(st.p.Arena, st.reads[role])
		if err != nil {
			return Because(ReasonInfrastructure, "%s trajectories: %v", role, err)
		}
		sets[role] = set
	}
	picked := selectPrompts(st.secret, st.rec.Reads, sets["B"], r.TPrompts)
	t := inc
	if len(st.p.Incumbent) == 0 {
		r.say("T: scoring on the resident incumbent engine (the stock stack is the pristine engine)")
	} else {
		cfg := base
		cfg.Stack = nil
		r.say("T: loading the pristine engine")
		var err error
		if t, err = r.Open(ctx, cfg); err != nil {
			return Because(ReasonInfrastructure, "pristine engine: %v", err)
		}
		defer func() { _ = t.Close() }()
	}
	traj := map[string][]Trajectory{}
	for _, role := range []string{"B", "C", "B′"} {
		byRID := map[string]SealedRequest{}
		for _, q := range sets[role].Requests {
			byRID[q.RID] = q
		}
		var seqs [][]int
		var from []int
		var reqs []SealedRequest
		for _, rid := range picked {
			q, ok := byRID[rid]
			if !ok || len(q.Tokens) == 0 {
				return Because(ReasonInfrastructure, "%s has no trajectory for %s", role, rid)
			}
			seqs = append(seqs, append(append([]int{}, q.Prompt...), q.Tokens...))
			from = append(from, len(q.Prompt))
			reqs = append(reqs, q)
		}
		nll, err := t.Score(ctx, seqs, from)
		if err != nil {
			return Because(ReasonInfrastructure, "T scoring %s: %v", role, err)
		}
		for i, q := range reqs {
			if len(nll[i]) != len(q.Tokens) {
				return Because(ReasonInfrastructure, "T scored %d of %s's %d tokens of %s", len(nll[i]), role, len(q.Tokens), q.RID)
			}
			st.rec.Scores = append(st.rec.Scores, ScoreRecord{Role: role, RID: q.RID, Wave: q.Wave, NLL: floats(nll[i]), Digest: tokensDigest(q.Tokens)})
			own, err := parseFloats(q.Logprobs)
			if err != nil {
				return Because(ReasonInfrastructure, "%s logprobs: %v", role, err)
			}
			traj[role] = append(traj[role], Trajectory{TeacherNLL: nll[i], OwnLogprob: own})
		}
	}
	res, err := qr.Decide(traj["B"], traj["C"], traj["B′"])
	if err != nil {
		return Because(ReasonInfrastructure, "quality rule: %v", err)
	}
	if res.Verdict.Outcome != Pass {
		return res.Verdict
	}
	return Passed(fmt.Sprintf("r = %s ≥ bar %s; audit clean; quality unchanged", speed.Ratio, speed.Bar))
}

// selectPrompts ranks the requests of a read by SHA-256(secret ‖ the
// digests of the sealed reads ‖ rid) and returns the first n request ids:
// a selection fixed only once the secret is revealed, after every read is
// sealed, and moved by what the reads measured (post-read entropy), so no
// one — the referee included — could have known it before the reads.
func selectPrompts(secret []byte, reads []evidence.Ref, set TrajectorySet, n int) []string {
	seed := append([]byte{}, secret...)
	for _, r := range reads {
		seed = append(seed, r.Digest...)
	}
	type ranked struct {
		rid  string
		rank [32]byte
	}
	var all []ranked
	for _, q := range set.Requests {
		all = append(all, ranked{q.RID, sha256.Sum256(append(append([]byte{}, seed...), q.RID...))})
	}
	sort.Slice(all, func(i, j int) bool { return bytes.Compare(all[i].rank[:], all[j].rank[:]) < 0 })
	var out []string
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, all[i].rid)
	}
	return out
}

// tokensDigest names a token sequence in a score record.
func tokensDigest(tokens []int) string {
	_, ref, err := evidence.Encode("cacheon.referee.tokens", tokens)
	if err != nil {
		return ""
	}
	return ref.Digest
}

// digestOf is the canon digest of a value (for plan fields).
func digestOf(v any) (string, error) {
	_, ref, err := evidence.Encode("cacheon.referee.value", v)
	return ref.Digest, err
}
