package weightpub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"cacheon/internal/market/chain"
)

// fakeChain is a hand-written chain: blocks advance when the test says,
// a submission is included in the next block (unless dropped), the
// finalized head lags the head by finality, and Weights reads the last
// included set at or before the finalized head. With path set, every
// change is saved there, so a chain outlives a killed process.
type fakeChain struct {
	path string

	State struct {
		Head     uint64         `json:"head"`
		Finality uint64         `json:"finality"`
		Meta     []chain.Neuron `json:"meta"`
		Sets     []fakeSet      `json:"sets"`
		// Drop lists submission ordinals (0-based) the chain loses.
		Drop []int `json:"drop"`
		// Quantize rounds read-back values as a u16 normalisation would.
		Quantize bool `json:"quantize"`
	}
	// Hooks for unit tests.
	setErr   error
	metaErr  error
	tamper   func(ws []chain.Weight) []chain.Weight
	onSubmit func()
}

type fakeSet struct {
	Hotkey  string         `json:"hotkey"`
	Head    uint64         `json:"head"` // the head when it was submitted
	Block   uint64         `json:"block"`
	Weights []chain.Weight `json:"weights"`
	ID      string         `json:"id"`
	Dropped bool           `json:"dropped"`
}

func loadFake(path string) (*fakeChain, error) {
	c := &fakeChain{path: path}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return c, json.Unmarshal(b, &c.State)
}

func (c *fakeChain) save() error {
	if c.path == "" {
		return nil
	}
	b, err := json.Marshal(c.State)
	if err != nil {
		return err
	}
	tmp := c.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	return os.Rename(tmp, c.path)
}

func (c *fakeChain) advance(n uint64) error {
	c.State.Head += n
	return c.save()
}

func (c *fakeChain) finalized() uint64 {
	if c.State.Head < c.State.Finality {
		return 0
	}
	return c.State.Head - c.State.Finality
}

func (c *fakeChain) Finalized(ctx context.Context) (chain.Head, error) {
	return chain.Head{Number: c.finalized(), Hash: fmt.Sprintf("h%d", c.finalized())}, nil
}

func (c *fakeChain) Metagraph(ctx context.Context) ([]chain.Neuron, error) {
	if c.metaErr != nil {
		return nil, c.metaErr
	}
	return append([]chain.Neuron(nil), c.State.Meta...), nil
}

func (c *fakeChain) SetWeights(ctx context.Context, ws []chain.Weight) (string, error) {
	if c.onSubmit != nil {
		c.onSubmit()
	}
	if c.setErr != nil {
		return "", c.setErr
	}
	n := len(c.State.Sets)
	s := fakeSet{Hotkey: "val", Head: c.State.Head, Block: c.State.Head + 1, Weights: append([]chain.Weight(nil), ws...), ID: fmt.Sprintf("x%d", n)}
	for _, d := range c.State.Drop {
		s.Dropped = s.Dropped || d == n
	}
	c.State.Sets = append(c.State.Sets, s)
	if err := c.save(); err != nil {
		return "", err
	}
	return s.ID, nil
}

func (c *fakeChain) Weights(ctx context.Context, hotkey string) (chain.WeightSet, error) {
	ws := chain.WeightSet{Hotkey: hotkey, Weights: []chain.Weight{}}
	for _, s := range c.State.Sets {
		if s.Hotkey == hotkey && !s.Dropped && s.Block <= c.finalized() {
			ws.Block, ws.Weights = s.Block, s.Weights
			if c.State.Quantize {
				ws.Weights = quantize(s.Weights)
			}
			if c.tamper != nil {
				ws.Weights = c.tamper(ws.Weights)
			}
		}
	}
	return ws, nil
}

// quantize maps ppm to u16 (largest → 65535) and back, as the Bittensor
// adapter's normalisation would.
func quantize(ws []chain.Weight) []chain.Weight {
	var max uint64
	for _, w := range ws {
		if uint64(w.PPM) > max {
			max = uint64(w.PPM)
		}
	}
	out := make([]chain.Weight, 0, len(ws))
	var total uint64
	u := make([]uint64, len(ws))
	for i, w := range ws {
		u[i] = (uint64(w.PPM)*65535 + max/2) / max
		total += u[i]
	}
	for i, w := range ws {
		out = append(out, chain.Weight{UID: w.UID, PPM: uint32((u[i]*1_000_000 + total/2) / total)})
	}
	return out
}

var errNet = errors.New("connection reset")
