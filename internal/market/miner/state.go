package miner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"cacheon/internal/canon"
	"cacheon/internal/market/chain"
)

// MaxStateBytes caps the state file.
const MaxStateBytes = 4 << 20

// StatePath is the pending-commit state file kept next to a hotkey file.
func StatePath(keyPath string) string { return keyPath + ".commits.json" }

// State is the miner's local record of its commitments: everything a
// reveal needs (the salt never leaves this file before the reveal).
type State struct {
	Version int       `json:"version"`
	Commits []Pending `json:"commits"`
}

// Pending is one commitment and, once revealed, where its reveal landed.
type Pending struct {
	// Commitment is the digest posted on chain.
	Commitment string `json:"commitment"`
	// Chain is the genesis hash of the chain it was posted to.
	Chain string `json:"chain"`
	// H, U and Salt are what the commitment binds (with the hotkey).
	H    string `json:"h"`
	U    string `json:"u"`
	Salt string `json:"salt"`
	// Extrinsic and Block are the commit extrinsic and its block (empty
	// and 0 until the chain included it).
	Extrinsic string `json:"extrinsic,omitempty"`
	Block     uint64 `json:"block,omitempty"`
	// Reveal and RevealBlock record the reveal once included.
	Reveal      string `json:"reveal,omitempty"`
	RevealBlock uint64 `json:"reveal_block,omitempty"`
}

// ParseState strictly decodes a state file: canonical JSON, version 1, no
// unknown fields, well-formed digests and payloads, no duplicate
// commitments.
func ParseState(b []byte) (State, error) {
	if len(b) > MaxStateBytes {
		return State{}, fmt.Errorf("state: %d bytes exceeds the %d-byte cap", len(b), MaxStateBytes)
	}
	var s State
	if err := canon.Decode(b, &s); err != nil {
		return State{}, fmt.Errorf("state: %w", err)
	}
	if s.Version != 1 {
		return State{}, fmt.Errorf("state: version %d is not supported (want 1)", s.Version)
	}
	seen := map[string]bool{}
	for i, p := range s.Commits {
		if err := p.check(); err != nil {
			return State{}, fmt.Errorf("state: commit %d: %w", i, err)
		}
		if seen[p.Commitment] {
			return State{}, fmt.Errorf("state: commit %d: commitment %s appears twice", i, p.Commitment)
		}
		seen[p.Commitment] = true
	}
	return s, nil
}

func (p Pending) check() error {
	for name, d := range map[string]string{"commitment": p.Commitment, "chain": p.Chain, "salt": p.Salt} {
		if err := canon.ValidDigest(d); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	for name, d := range map[string]string{"extrinsic": p.Extrinsic, "reveal": p.Reveal} {
		if d == "" {
			continue
		}
		if err := canon.ValidDigest(d); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if _, err := chain.EncodePayload(p.H, p.U); err != nil {
		return err
	}
	return nil
}

// LoadState reads the state file; a missing file is an empty state.
func LoadState(path string) (State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return State{Version: 1, Commits: []Pending{}}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("state %s: %w", path, err)
	}
	s, err := ParseState(b)
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// SaveState writes the state file atomically (a temporary file beside it,
// synced, renamed), mode 0600.
func SaveState(path string, s State) error {
	if s.Commits == nil {
		s.Commits = []Pending{}
	}
	b, err := canon.Marshal(s)
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".commits-*")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// find returns the index of commitment d in s (-1 when absent).
func (s State) find(d string) int {
	for i, p := range s.Commits {
		if p.Commitment == d {
			return i
		}
	}
	return -1
}
