package node

// The product link: settled crowns as the crown records `cacheon
// integrate` takes.

import (
	"context"
	"fmt"
	"math/big"

	"cacheon/internal/canon"
	"cacheon/internal/evidence"
	"cacheon/internal/market/settle"
	"cacheon/internal/product"
	"cacheon/internal/referee"
	"cacheon/internal/store"
)

// Crown is one settled crown as a product crown record: the journal
// sequence number of its CROWN event, the crowned reservation, the record,
// its digest (the crown ref) and canonical bytes.
type Crown struct {
	Seq         int64               `json:"seq"`
	Reservation string              `json:"reservation"`
	Record      product.CrownRecord `json:"record"`
	Digest      string              `json:"digest"`
	Data        []byte              `json:"-"`
}

// Crowns returns every settled crown, in journal order, as the crown
// record integrate takes. The records are a pure function of the verified
// settlement journal, the sealed attempt evidence and the crowned bundles
// in the work directory: the product evaluation stack starts at the
// arena's genesis stack and takes each crown in turn (product.ApplyCrown),
// so each record names the stack it was settled over and the generation it
// creates. The speedup is the lower r of the two attempts, exactly as
// sealed; the selected payload is the crowned bundle's files.
func (n *Node) Crowns(ctx context.Context) ([]Crown, error) {
	if n.qual == nil {
		return nil, fmt.Errorf("crowns: the node has no referee")
	}
	var entries []store.JournalEntry
	err := n.Store.View(ctx, func(tx store.Tx) error {
		var err error
		entries, err = tx.Journal(ctx, 0, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("crowns: read the journal: %w", err)
	}
	recs := make([]settle.Record, len(entries))
	for i, e := range entries {
		recs[i] = settle.Record{Seq: e.Seq, Digest: e.Digest, Data: e.Data}
	}
	if _, err := settle.Verify(recs); err != nil {
		return nil, fmt.Errorf("crowns: the settlement journal does not verify: %w", err)
	}
	ad, err := n.arena.Digest()
	if err != nil {
		return nil, fmt.Errorf("crowns: %w", err)
	}
	cat := n.qual.Targets
	stack := product.Genesis(ad, cat)
	var out []Crown
	for _, e := range entries {
		ev, _, err := settle.DecodeEvent(e.Data)
		if err != nil {
			return nil, fmt.Errorf("crowns: journal entry %d: %w", e.Seq, err)
		}
		if ev.Kind != settle.KindCrown {
			continue
		}
		q, err := n.crownedQualification(ev)
		if err != nil {
			return nil, fmt.Errorf("crowns: crown %d (%s): %w", e.Seq, ev.Reservation, err)
		}
		inc := stack
		rec, err := referee.CrownRecord(q, referee.CrownInput{Catalog: cat, ArenaDigest: ad, Target: ev.Target,
			Contributor: ev.Contributor, BundleDir: n.Intake.BundleDir(ev.Reservation), ContentHash: ev.Proposal, Incumbent: &inc})
		if err != nil {
			return nil, fmt.Errorf("crowns: crown %d (%s): %w", e.Seq, ev.Reservation, err)
		}
		if rec.Attribution.Proposal != ev.Proposal {
			return nil, fmt.Errorf("crowns: crown %d: the bundle in the work directory is not the crowned proposal", e.Seq)
		}
		if stack, err = product.ApplyCrown(cat, stack, rec); err != nil {
			return nil, fmt.Errorf("crowns: crown %d: %w", e.Seq, err)
		}
		data, digest, err := product.Encode(&rec)
		if err != nil {
			return nil, fmt.Errorf("crowns: crown %d: %w", e.Seq, err)
		}
		out = append(out, Crown{Seq: e.Seq, Reservation: ev.Reservation, Record: rec, Digest: digest, Data: data})
	}
	return out, nil
}

// crownedQualification re-opens the two attempts a CROWN event names and
// returns them as the crowned qualification a crown record is built from:
// the speedup is the lower of their sealed ratios, which must floor to the
// event's parts per million.
func (n *Node) crownedQualification(ev settle.Event) (*referee.Qualification, error) {
	q := &referee.Qualification{Crowned: true}
	var lowest *big.Rat
	for _, d := range ev.Evidence {
		ref := evidence.Ref{Domain: referee.DomainAttempt, Digest: d}
		rec, err := evidence.Load[referee.AttemptRecord](n.qual.Referee.Store, ref)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", ref, err)
		}
		if rec.Verdict.Outcome != referee.Pass || rec.Speed == nil {
			return nil, fmt.Errorf("attempt %s is not a PASS with speed figures", ref)
		}
		r, ok := new(big.Rat).SetString(string(rec.Speed.Ratio))
		if !ok {
			return nil, fmt.Errorf("attempt %s: ratio %q", ref, rec.Speed.Ratio)
		}
		if lowest == nil || r.Cmp(lowest) < 0 {
			lowest, q.Speedup = r, rec.Speed.Ratio
		}
		q.Attempts = append(q.Attempts, referee.QualifiedAttempt{Ref: ref, Record: rec})
	}
	if len(q.Attempts) != 2 {
		return nil, fmt.Errorf("%d attempt(s) named, want 2", len(q.Attempts))
	}
	ppm, err := settle.SpeedupPPM(canon.Decimal(q.Speedup))
	if err != nil || ppm != ev.SpeedupPPM {
		return nil, fmt.Errorf("the attempts' speedup %s is not the event's %d ppm", q.Speedup, ev.SpeedupPPM)
	}
	q.Verdict = referee.Passed(fmt.Sprintf("2 passing attempts; speedup %s", q.Speedup))
	return q, nil
}
