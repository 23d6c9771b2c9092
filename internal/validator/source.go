package validator

// The dashboard's Source over the validator: read-only views of the store
// (queue, events, attempts, journal, stack, weights) and of the sealed
// evidence. Every method reads in a View transaction or opens evidence;
// nothing here writes.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"cacheon/internal/dashboard"
	"cacheon/internal/evidence"
	"cacheon/internal/market/settle"
	"cacheon/internal/market/settle/commit"
	"cacheon/internal/market/weightpub"
	"cacheon/internal/node"
	"cacheon/internal/referee"
	"cacheon/internal/store"
)

// Source returns the dashboard's view of v.
func (v *Validator) Source() dashboard.Source { return source{v: v} }

type source struct{ v *Validator }

func (s source) view(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.v.Store.View(ctx, fn)
}

func (s source) Overview(ctx context.Context) (dashboard.Overview, error) {
	var o dashboard.Overview
	head, err := s.v.Chain.Finalized(ctx)
	if err == nil {
		o.Head = head.Number
	}
	err = s.view(ctx, func(tx store.Tx) error {
		counts, err := tx.CountByState(ctx)
		if err != nil {
			return err
		}
		for _, st := range node.States() {
			o.Queue = append(o.Queue, dashboard.StateCount{State: string(st), Count: counts[string(st)]})
		}
		evs, err := tx.Events(ctx, "")
		if err != nil {
			return err
		}
		o.Transitions = uint64(len(evs))
		seq, digest, err := tx.JournalHead(ctx)
		if err != nil {
			return err
		}
		o.Journal = dashboard.JournalHead{Seq: uint64(seq), Digest: digest}
		rec, err := tx.EvalStack(ctx)
		if err != nil {
			return err
		}
		_, sd, err := commit.DecodeStack(rec)
		if err != nil {
			return err
		}
		o.Stack = dashboard.StackHead{Generation: uint64(rec.Generation), Digest: sd}
		ds, err := tx.Decisions(ctx)
		for _, d := range ds {
			if d.Outcome == "crowned" {
				o.Crowns++
			}
		}
		if err != nil {
			return err
		}
		pubs, err := tx.WeightPublications(ctx, 1)
		if err != nil {
			return err
		}
		if len(pubs) == 1 {
			w := publication(pubs[0])
			o.Weights = &w
		}
		return nil
	})
	if err != nil {
		return o, err
	}
	jv, err := s.Journal(ctx)
	if err != nil {
		return o, err
	}
	o.Journal.Verified, o.Journal.Error = jv.Verified, jv.Error
	return o, nil
}

func submission(r store.Reservation) dashboard.Submission {
	return dashboard.Submission{ID: r.ID, Block: r.Pos.Block, Index: r.Pos.Index, Hotkey: r.Hotkey, ContentHash: r.ContentHash,
		URL: r.URL, State: r.State, Reason: r.Reason, Attempts: r.Attempts, Passes: r.Passes, UpdatedBlock: r.UpdatedBlock}
}

func (s source) Submissions(ctx context.Context) ([]dashboard.Submission, error) {
	var out []dashboard.Submission
	var states []string
	for _, st := range node.States() {
		states = append(states, string(st))
	}
	err := s.view(ctx, func(tx store.Tx) error {
		rs, err := tx.List(ctx, 0, states...)
		if err != nil {
			return err
		}
		outcomes, err := outcomesOf(ctx, tx)
		if err != nil {
			return err
		}
		for _, r := range rs {
			sub := submission(r)
			sub.Outcome = outcomes[r.ID]
			out = append(out, sub)
		}
		return nil
	})
	return out, err
}

// outcomesOf is settlement's decision by reservation.
func outcomesOf(ctx context.Context, tx store.Tx) (map[string]string, error) {
	ds, err := tx.Decisions(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ds))
	for _, d := range ds {
		out[d.Reservation] = d.Outcome
	}
	return out, nil
}

func (s source) Submission(ctx context.Context, id string) (dashboard.SubmissionDetail, error) {
	var d dashboard.SubmissionDetail
	err := s.view(ctx, func(tx store.Tx) error {
		r, err := tx.Get(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return dashboard.ErrNotFound
		}
		if err != nil {
			return err
		}
		d.Submission, d.Fingerprint = submission(r), r.Fingerprint
		evs, err := tx.Events(ctx, id)
		if err != nil {
			return err
		}
		for _, e := range evs {
			d.Timeline = append(d.Timeline, dashboard.TimelineEvent{At: time.UnixMilli(e.AtMS).UTC(), Block: e.Block, Step: step(e),
				From: e.From, To: e.To, Reason: e.Reason})
		}
		as, err := tx.Attempts(ctx, id)
		if err != nil {
			return err
		}
		for _, a := range as {
			d.Attempts = append(d.Attempts, dashboard.AttemptSummary{Ref: a.Evidence, Number: a.N, At: time.UnixMilli(a.EndedMS).UTC(),
				Verdict: a.Verdict, Reason: a.Reason, Ratio: ppmText(a.SpeedupPPM)})
			if a.Evidence != "" {
				d.Timeline = append(d.Timeline, dashboard.TimelineEvent{At: time.UnixMilli(a.EndedMS).UTC(), Block: a.Block,
					Step: fmt.Sprintf("attempt %d", a.N), To: a.Verdict, Reason: a.Reason, Ref: a.Evidence})
			}
		}
		ds, err := tx.Decisions(ctx)
		for _, dc := range ds {
			if dc.Reservation == id {
				d.Submission.Outcome = dc.Outcome
				d.Timeline = append(d.Timeline, dashboard.TimelineEvent{At: time.UnixMilli(dc.AtMS).UTC(), Step: "settlement", To: dc.Outcome, Reason: dc.Reason})
			}
		}
		return err
	})
	return d, err
}

// step names the intake step of a transition from its states.
func step(e store.Event) string {
	switch {
	case e.From == "":
		return "reveal"
	case e.To == "fetching" || e.From == "fetching":
		return "fetch"
	case e.From == "published":
		return "scan"
	case e.From == "screening":
		return "screen"
	case e.To == "qualifying" || e.From == "qualifying":
		return "qualify"
	}
	return "intake"
}

// ppmText writes parts per million as a decimal (1234567 → "1.234567").
func ppmText(ppm int64) string {
	if ppm == 0 {
		return ""
	}
	return fmt.Sprintf("%d.%06d", ppm/settle.PPM, ppm%settle.PPM)
}

func (s source) Attempt(ctx context.Context, ref string) (dashboard.AttemptDetail, error) {
	r, err := evidence.ParseRef(ref)
	if err != nil || r.Domain != referee.DomainAttempt {
		return dashboard.AttemptDetail{}, dashboard.ErrNotFound
	}
	rec, err := evidence.Load[referee.AttemptRecord](s.v.Evidence, r)
	if err != nil {
		return dashboard.AttemptDetail{}, dashboard.ErrNotFound
	}
	d := dashboard.AttemptDetail{Ref: ref, Verdict: string(rec.Verdict.Outcome), Reason: string(rec.Verdict.Reason), Detail: rec.Verdict.Detail}
	d.Evidence = append(d.Evidence, dashboard.EvidenceLink{Name: "attempt record", Ref: ref}, dashboard.EvidenceLink{Name: "plan", Ref: rec.Plan.String()})
	if plan, err := evidence.Load[referee.Plan](s.v.Evidence, rec.Plan); err == nil {
		d.Target, d.Number = plan.Target, plan.Attempt
	}
	if sp := rec.Speed; sp != nil {
		d.Ratio, d.Drift, d.Bar = string(sp.Ratio), string(sp.Drift), string(sp.Bar)
	}
	for _, rr := range rec.Reads {
		read, err := evidence.Load[referee.ReadRecord](s.v.Evidence, rr)
		if err != nil {
			return d, fmt.Errorf("read %s: %w", rr, err)
		}
		out := dashboard.Read{Role: read.Role, Evidence: rr.String()}
		for _, w := range read.Waves {
			if q, err := w.Rate(); err == nil {
				f, _ := q.Float64()
				out.WaveRates = append(out.WaveRates, f)
			}
		}
		if q, err := referee.ScoredRate(read.Waves); err == nil {
			out.Rate, _ = q.Float64()
		}
		d.Reads = append(d.Reads, out)
		d.Evidence = append(d.Evidence, dashboard.EvidenceLink{Name: "read " + read.Role, Ref: rr.String()})
	}
	if rec.Audit != nil {
		d.Audit.Evidence = rec.Audit.String()
		if a, err := evidence.Load[referee.AuditRecord](s.v.Evidence, *rec.Audit); err == nil {
			d.Audit.Graded = len(a.Dumps)
			for _, dump := range a.Dumps {
				if dump.Outcome != "PASS" {
					d.Audit.Failures++
				}
			}
			d.Audit.Summary = fmt.Sprintf("%d dump(s) regraded, %d failed", d.Audit.Graded, d.Audit.Failures)
		}
		d.Evidence = append(d.Evidence, dashboard.EvidenceLink{Name: "audit", Ref: rec.Audit.String()})
	}
	if len(rec.Scores) > 0 {
		d.Quality = quality(s.v.Evidence, r)
	}
	return d, nil
}

// quality is role T's own result (referee.CheckQuality), not the
// attempt's verdict: per metric the stock drift against its envelope and
// the regression's bounds against the allowed delta, then the divergence
// of the candidate engine's own log-probabilities from T's.
func quality(store *evidence.Store, ref evidence.Ref) dashboard.Quality {
	rep, ok, err := referee.CheckQuality(store, ref)
	if err != nil {
		return dashboard.Quality{Verdict: "UNREADABLE " + err.Error()}
	}
	if !ok {
		return dashboard.Quality{}
	}
	// T's scores are sealed in the attempt record itself.
	q := dashboard.Quality{Verdict: rep.Verdict.String(), Evidence: ref.String()}
	n := fmt.Sprint(rep.Prompts)
	for _, f := range rep.Figures {
		q.Rows = append(q.Rows,
			dashboard.QualityRow{Prompt: n, Metric: f.Metric + ": stock drift |mean(B′−B)|", Value: num(f.Drift),
				Limit: "≤ " + num(f.DriftEnvelope), Pass: f.Drift <= f.DriftEnvelope},
			dashboard.QualityRow{Prompt: n, Metric: f.Metric + ": regression C−(B+B′)/2 [bounds]",
				Value: fmt.Sprintf("%s [%s, %s]", num(f.Regression), num(f.Lower), num(f.Upper)),
				Limit: "≤ " + num(f.Allowed), Pass: f.Upper <= f.Allowed})
	}
	inc := max(rep.Divergence[0], rep.Divergence[2])
	q.Rows = append(q.Rows, dashboard.QualityRow{Prompt: n, Metric: "own log-probabilities' distance from T: C (incumbent's)",
		Value: fmt.Sprintf("%s (%s)", num(rep.Divergence[1]), num(inc)), Limit: "≤ incumbent's + " + num(rep.DivergenceEnvelope),
		Pass: rep.Divergence[1]-inc <= rep.DivergenceEnvelope})
	return q
}

// num writes a quality figure to four significant digits.
func num(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }

func (s source) Stacks(ctx context.Context) ([]dashboard.StackGeneration, error) {
	_, entries, err := s.journal(ctx)
	if err != nil {
		return nil, err
	}
	var cur store.StackRecord
	if err := s.view(ctx, func(tx store.Tx) error { var err error; cur, err = tx.EvalStack(ctx); return err }); err != nil {
		return nil, err
	}
	out := []dashboard.StackGeneration{}
	g0, d0, err := commit.DecodeStack(store.StackRecord{})
	if err != nil {
		return nil, err
	}
	out = append(out, generation(g0, d0, nil))
	var crown *dashboard.Crown
	for _, e := range entries {
		ev, digest, err := settle.DecodeEvent(e.Data)
		if err != nil {
			return nil, err
		}
		switch ev.Kind {
		case settle.KindCrown:
			crown = &dashboard.Crown{Seq: uint64(e.Seq), Digest: digest, Target: ev.Target, Proposal: ev.Proposal, Contributor: ev.Contributor,
				Reservation: ev.Reservation, SpeedupPPM: uint64(ev.SpeedupPPM), Block: ev.Block, Evidence: ev.Evidence}
		case settle.KindStackTransition:
			// Only the current generation's entries are stored; the
			// earlier ones are named by their digest.
			gen := dashboard.StackGeneration{Generation: uint64(ev.Generation), Digest: ev.Stack, Crown: crown}
			if cur.Generation == ev.Generation {
				st, d, err := commit.DecodeStack(cur)
				if err == nil {
					gen = generation(st, d, crown)
				}
			}
			out = append(out, gen)
			crown = nil
		}
	}
	return out, nil
}

func generation(st settle.Stack, digest string, c *dashboard.Crown) dashboard.StackGeneration {
	g := dashboard.StackGeneration{Generation: uint64(st.Generation), Digest: digest, Crown: c}
	for _, e := range st.Entries {
		g.Entries = append(g.Entries, dashboard.StackEntry{Target: e.Target, Proposal: e.Proposal, Contributor: e.Contributor,
			Reservation: e.Reservation, CrownDigest: e.Crown})
	}
	return g
}

func (s source) journal(ctx context.Context) (dashboard.JournalView, []store.JournalEntry, error) {
	var entries []store.JournalEntry
	if err := s.view(ctx, func(tx store.Tx) error { var err error; entries, err = tx.Journal(ctx, 0, 0); return err }); err != nil {
		return dashboard.JournalView{}, nil, err
	}
	jv := dashboard.JournalView{Verified: true}
	recs := make([]settle.Record, len(entries))
	for i, e := range entries {
		recs[i] = settle.Record{Seq: e.Seq, Digest: e.Digest, Data: e.Data}
		je := dashboard.JournalEntry{Seq: uint64(e.Seq), Digest: e.Digest, Prev: e.Prev, Kind: e.Kind, Reservation: e.Reservation}
		if ev, _, err := settle.DecodeEvent(e.Data); err == nil {
			je.Target = ev.Target
			je.Summary = fmt.Sprintf("generation %d", ev.Generation)
			if ev.Kind == settle.KindCrown {
				je.Summary = fmt.Sprintf("speedup %s, block %d", ppmText(ev.SpeedupPPM), ev.Block)
			}
		}
		jv.Entries = append(jv.Entries, je)
	}
	if _, err := settle.Verify(recs); err != nil {
		jv.Verified, jv.Error = false, err.Error()
	}
	return jv, entries, nil
}

func (s source) Journal(ctx context.Context) (dashboard.JournalView, error) {
	jv, _, err := s.journal(ctx)
	return jv, err
}

func publication(p store.WeightPublication) dashboard.WeightPublication {
	w := dashboard.WeightPublication{ID: fmt.Sprint(p.ID), Block: p.Block, State: p.State, Reason: p.Reason,
		Burn: strings.HasPrefix(p.Reason, "burn")}
	if ws, err := weightpub.DecodeVector(p.Vector); err == nil {
		for _, x := range ws {
			w.Vector = append(w.Vector, dashboard.WeightEntry{UID: x.UID, PPM: x.PPM})
		}
	}
	return w
}

func (s source) Weights(ctx context.Context) ([]dashboard.WeightPublication, error) {
	var out []dashboard.WeightPublication
	err := s.view(ctx, func(tx store.Tx) error {
		ps, err := tx.WeightPublications(ctx, 0)
		for _, p := range ps {
			out = append(out, publication(p))
		}
		return err
	})
	return out, err
}

func (s source) Evidence(ctx context.Context, ref string) ([]byte, error) {
	r, err := evidence.ParseRef(ref)
	if err != nil {
		return nil, dashboard.ErrNotFound
	}
	b, err := s.v.Evidence.Bytes(r)
	if err != nil {
		return nil, dashboard.ErrNotFound
	}
	return b, nil
}

func (s source) CrownRecords(ctx context.Context) ([]dashboard.CrownRecord, error) {
	cs, err := s.v.Node.Crowns(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]dashboard.CrownRecord, 0, len(cs))
	for _, c := range cs {
		out = append(out, dashboard.CrownRecord{Seq: uint64(c.Seq), Reservation: c.Reservation, Target: c.Record.Target,
			Generation: uint64(c.Record.Generation), Speedup: string(c.Record.Speedup), Contributor: c.Record.Attribution.Contributor,
			Digest: c.Digest, Record: c.Data})
	}
	return out, nil
}
