package devnet

// The demo reads a devnet's progress and outcomes as any client would:
// through the validator's read-only JSON API (the dashboard's /api), never
// through the store the validator holds.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cacheon/internal/dashboard"
	"cacheon/internal/market/chain"
	"cacheon/internal/market/weightpub"
	"cacheon/internal/node"
	"cacheon/internal/product"
)

// maxAPIBody bounds one answer of the validator's API.
const maxAPIBody = 32 << 20

// api reads the validator's JSON API at base ("http://host:port").
type api struct {
	base string
	hc   *http.Client
}

func newAPI(addr string) *api {
	return &api{base: "http://" + addr, hc: &http.Client{Timeout: 30 * time.Second}}
}

// get decodes the answer of GET path into v (unknown fields refused: the
// API and this client are built together).
func (a *api) get(ctx context.Context, path string, v any) error {
	body, err := getBody(ctx, a.hc, a.base+path, maxAPIBody)
	if err != nil {
		return fmt.Errorf("validator API: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("validator API: GET %s: %w", path, err)
	}
	return nil
}

func (a *api) submissions(ctx context.Context) ([]dashboard.Submission, error) {
	var out []dashboard.Submission
	return out, a.get(ctx, "/api/submissions", &out)
}

func (a *api) overview(ctx context.Context) (dashboard.Overview, error) {
	var out dashboard.Overview
	return out, a.get(ctx, "/api/overview", &out)
}

func (a *api) weights(ctx context.Context) ([]dashboard.WeightPublication, error) {
	var out []dashboard.WeightPublication
	return out, a.get(ctx, "/api/weights", &out)
}

// crowns are the settled crowns as crown records, each re-read strictly
// and checked against the digest the validator names for it.
func (a *api) crowns(ctx context.Context) ([]node.Crown, error) {
	var rows []dashboard.CrownRecord
	if err := a.get(ctx, "/api/crowns", &rows); err != nil {
		return nil, err
	}
	out := make([]node.Crown, 0, len(rows))
	for _, r := range rows {
		rec, digest, err := product.DecodeLenient[product.CrownRecord](r.Record)
		if err != nil {
			return nil, fmt.Errorf("validator API: crown %d: %w", r.Seq, err)
		}
		if digest != r.Digest {
			return nil, fmt.Errorf("validator API: crown %d: the record's digest is %s, not the %s named", r.Seq, digest, r.Digest)
		}
		data, _, err := product.Encode(&rec)
		if err != nil {
			return nil, fmt.Errorf("validator API: crown %d: %w", r.Seq, err)
		}
		out = append(out, node.Crown{Seq: int64(r.Seq), Reservation: r.Reservation, Record: rec, Digest: digest, Data: data})
	}
	return out, nil
}

// confirmedWeights waits for a weight publication confirmed after the
// crown: one whose vector credits a claim (not only the burn).
func (a *api) confirmedWeights(ctx context.Context, wait time.Duration) (string, error) {
	end := time.Now().Add(wait)
	for {
		pubs, err := a.weights(ctx)
		if err != nil {
			return "", fmt.Errorf("devnet demo: weights: %w", err)
		}
		for _, p := range pubs {
			if p.State != "confirmed" {
				continue
			}
			ws := make([]chain.Weight, 0, len(p.Vector))
			for _, e := range p.Vector {
				ws = append(ws, chain.Weight{UID: e.UID, PPM: e.PPM})
			}
			if len(ws) > 1 || (len(ws) == 1 && ws[0].UID != 0) {
				return weightpub.FormatWeights(ws), nil
			}
		}
		if time.Now().After(end) {
			return "", errors.New("devnet demo: no weight publication crediting the crown was confirmed in time")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
