// Package miner is the miner's side of commit/reveal on the local chain:
// the content hash of a bundle or archive, the commitment (with its secret
// salt kept in a local state file next to the hotkey), and the reveal once
// the commitment's block is finalized. The CLI only parses flags and
// prints what these functions return.
package miner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/market/chain"
	"cacheon/internal/market/localchain"
)

// ContentHash returns the content hash a miner commits for path: a bundle
// directory hashes as `cacheon package` does; a .tar.gz archive is
// extracted (with the validator's limits) into a private temporary
// directory and its content hashed.
func ContentHash(ctx context.Context, path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fault.CandidateErr(fmt.Errorf("content hash: %w", err))
	}
	if st.IsDir() {
		h, err := bundle.ContentHash(path)
		if err != nil {
			return "", fault.CandidateErr(err)
		}
		return h, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fault.CandidateErr(fmt.Errorf("content hash: %w", err))
	}
	defer f.Close()
	tmp, err := os.MkdirTemp("", "cacheon-miner-")
	if err != nil {
		return "", fault.InfraErr(fmt.Errorf("content hash: scratch: %w", err))
	}
	defer os.RemoveAll(tmp)
	h, err := bundle.Extract(ctx, f, filepath.Join(tmp, "bundle"), bundle.DefaultExtractLimits(), "")
	if err != nil {
		return "", fault.CandidateErr(fmt.Errorf("content hash of archive %s: %w", path, err))
	}
	return h, nil
}

// attribute says whose fault a chain error is: a refusal is the miner's
// input; anything else (an unreachable node, a timeout) infrastructure.
func attribute(err error) error {
	if err == nil {
		return nil
	}
	if localchain.Refusal(err) != "" {
		return fault.CandidateErr(err)
	}
	return fault.InfraErr(err)
}

// Committed is the result of Commit.
type Committed struct {
	Commitment string         `json:"commitment"`
	H          string         `json:"content_hash"`
	U          string         `json:"url"`
	Extrinsic  string         `json:"extrinsic"`
	Pos        chain.Position `json:"pos"`
	State      string         `json:"state_file"`
}

// Commit posts a commitment to (h, u) signed by w's hotkey and waits until
// a block includes it. The salt is written to the state file before the
// commitment is posted, so a crash never loses what a reveal needs.
func Commit(ctx context.Context, w *localchain.Wallet, statePath, h, u string, rand io.Reader) (Committed, error) {
	if _, err := chain.EncodePayload(h, u); err != nil {
		return Committed{}, fault.UsageErr(fmt.Errorf("commit: %w", err))
	}
	info, err := w.Backend().Info(ctx)
	if err != nil {
		return Committed{}, attribute(fmt.Errorf("commit: %w", err))
	}
	salt, err := localchain.NewSalt(rand)
	if err != nil {
		return Committed{}, fault.InfraErr(fmt.Errorf("commit: %w", err))
	}
	d, err := localchain.CommitmentDigest(h, u, w.Hotkey(), salt)
	if err != nil {
		return Committed{}, fault.UsageErr(fmt.Errorf("commit: %w", err))
	}
	st, err := LoadState(statePath)
	if err != nil {
		return Committed{}, fault.CandidateErr(fmt.Errorf("commit: %w", err))
	}
	st.Commits = append(st.Commits, Pending{Commitment: d, Chain: info.Genesis, H: h, U: u, Salt: salt})
	i := len(st.Commits) - 1
	if err := SaveState(statePath, st); err != nil {
		return Committed{}, fault.UsageErr(fmt.Errorf("commit: %w", err))
	}
	r, err := w.Commit(ctx, d)
	if err != nil {
		st.Commits = st.Commits[:i]
		if serr := SaveState(statePath, st); serr != nil {
			err = errors.Join(err, serr)
		}
		return Committed{}, attribute(fmt.Errorf("commit: %w", err))
	}
	st.Commits[i].Extrinsic = r.ID
	if err := SaveState(statePath, st); err != nil {
		return Committed{}, fault.UsageErr(fmt.Errorf("commit: %w", err))
	}
	r, err = w.WaitIncluded(ctx, r.ID)
	if err != nil {
		return Committed{}, attribute(fmt.Errorf("commit: %w", err))
	}
	st.Commits[i].Block = r.Pos.Block
	if err := SaveState(statePath, st); err != nil {
		return Committed{}, fault.UsageErr(fmt.Errorf("commit: %w", err))
	}
	return Committed{Commitment: d, H: h, U: u, Extrinsic: r.ID, Pos: r.Pos, State: statePath}, nil
}

// RevealOptions select and pace reveals.
type RevealOptions struct {
	// Commitment reveals only this commitment ("": every unrevealed one
	// in the state file that was posted to this chain).
	Commitment string
	// Wait bounds how long to wait for commitments to be finalized.
	Wait time.Duration
	// Progress, when set, hears about the wait.
	Progress func(msg string)
}

// Revealed is one reveal the chain included.
type Revealed struct {
	Commitment  string         `json:"commitment"`
	H           string         `json:"content_hash"`
	U           string         `json:"url"`
	CommitBlock uint64         `json:"commit_block"`
	Extrinsic   string         `json:"extrinsic"`
	Pos         chain.Position `json:"pos"`
}

// Reveal reveals the selected commitments once their blocks are
// finalized, waiting up to opts.Wait, and records each reveal in the
// state file. It returns what it revealed, also when a later one fails;
// with nothing left to reveal it returns an empty list.
func Reveal(ctx context.Context, w *localchain.Wallet, statePath string, opts RevealOptions) ([]Revealed, error) {
	st, err := LoadState(statePath)
	if err != nil {
		return nil, fault.CandidateErr(fmt.Errorf("reveal: %w", err))
	}
	info, err := w.Backend().Info(ctx)
	if err != nil {
		return nil, attribute(fmt.Errorf("reveal: %w", err))
	}
	var todo []int
	for i, p := range st.Commits {
		switch {
		case opts.Commitment != "" && p.Commitment != opts.Commitment:
		case p.RevealBlock != 0:
			if opts.Commitment != "" {
				return nil, fault.UsageErr(fmt.Errorf("reveal: commitment %s was already revealed in block %d", p.Commitment, p.RevealBlock))
			}
		case p.Chain != info.Genesis:
			if opts.Commitment != "" {
				return nil, fault.UsageErr(fmt.Errorf("reveal: commitment %s was posted to another chain (genesis %s)", p.Commitment, p.Chain))
			}
		default:
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		if opts.Commitment != "" {
			return nil, fault.UsageErr(fmt.Errorf("reveal: commitment %s is not in %s", opts.Commitment, statePath))
		}
		return []Revealed{}, nil // nothing to reveal is no error: reveal may run from a loop
	}
	wctx, cancel := context.WithTimeout(ctx, opts.Wait)
	defer cancel()
	out := []Revealed{}
	for _, i := range todo {
		p := st.Commits[i]
		if err := waitFinal(ctx, wctx, w, p, opts.Progress); err != nil {
			if errors.Is(err, errRevealedElsewhere) {
				continue
			}
			return out, err
		}
		r, err := w.Reveal(ctx, p.Commitment, p.H, p.U, p.Salt)
		if err != nil {
			return out, attribute(fmt.Errorf("reveal %s: %w", p.Commitment, err))
		}
		r, err = w.WaitIncluded(ctx, r.ID)
		if err != nil {
			return out, attribute(fmt.Errorf("reveal %s: %w", p.Commitment, err))
		}
		st.Commits[i].Reveal, st.Commits[i].RevealBlock = r.ID, r.Pos.Block
		if err := SaveState(statePath, st); err != nil {
			return out, fault.UsageErr(fmt.Errorf("reveal: %w", err))
		}
		out = append(out, Revealed{Commitment: p.Commitment, H: p.H, U: p.U, CommitBlock: p.Block, Extrinsic: r.ID, Pos: r.Pos})
	}
	return out, nil
}

var errRevealedElsewhere = errors.New("already revealed")

// waitFinal waits until p's commitment block is finalized, asking under
// ctx and waiting no longer than wait allows.
func waitFinal(ctx, wait context.Context, w *localchain.Wallet, p Pending, progress func(string)) error {
	last := ""
	for {
		cm, err := w.Backend().Commitment(ctx, p.Commitment)
		switch {
		case localchain.Refusal(err) == localchain.CodeNotFound:
			return fault.CandidateErr(fmt.Errorf("reveal %s: the chain has no such commitment (the node dropped it before a block included it?); commit again", p.Commitment))
		case err != nil:
			return attribute(fmt.Errorf("reveal %s: %w", p.Commitment, err))
		}
		switch cm.Status {
		case "finalized":
			return nil
		case "revealed":
			return errRevealedElsewhere
		}
		msg := fmt.Sprintf("commitment %s: %s (block %d, finalized head %d); waiting for finality", short(p.Commitment), cm.Status, cm.Block, cm.Finalized)
		if cm.Status == "pending" {
			msg = fmt.Sprintf("commitment %s: waiting for a block to include it", short(p.Commitment))
		}
		if progress != nil && msg != last {
			progress(msg)
			last = msg
		}
		t := time.NewTimer(w.Poll())
		select {
		case <-wait.Done():
			t.Stop()
			return fault.InfraErr(fmt.Errorf("reveal %s: %s when --wait ran out (block %d, finalized head %d)", p.Commitment, cm.Status, cm.Block, cm.Finalized))
		case <-t.C:
		}
	}
}

func short(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}
