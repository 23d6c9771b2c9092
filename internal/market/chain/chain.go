package chain

import "context"

// Head is a block the chain reports: its number and hash (lowercase hex).
type Head struct {
	Number uint64 `json:"number"`
	Hash   string `json:"hash"`
}

// Position orders chain events: the block that included the event and the
// event's index within that block. Positions compare block first, then
// index; the zero Position is before every event.
type Position struct {
	Block uint64 `json:"block"`
	Index uint32 `json:"index"`
}

// Less reports whether p is ordered before q.
func (p Position) Less(q Position) bool {
	if p.Block != q.Block {
		return p.Block < q.Block
	}
	return p.Index < q.Index
}

// Reveal is a finalized reveal that matched the hotkey's earlier
// commitment: the payload (content hash and archive URL) and where the
// commitment and the reveal were included. Matching a reveal against its
// commitment is the chain side's job (the local chain refuses a reveal
// that does not match; an adapter for another network must do the same),
// so intake only ever sees matched reveals.
type Reveal struct {
	// Pos is the reveal's own position; intake orders arrivals by it.
	Pos Position `json:"pos"`
	// Hotkey is the submitting miner's hotkey (hex ed25519 public key on the
	// local chain).
	Hotkey string `json:"hotkey"`
	// ContentHash and URL are the revealed payload (see Payload).
	ContentHash string `json:"content_hash"`
	URL         string `json:"url"`
	// CommitBlock is the block that included the matching commitment: the
	// proposal's submission block.
	CommitBlock uint64 `json:"commit_block"`
	// Extrinsic is the digest of the reveal extrinsic (unique per reveal).
	Extrinsic string `json:"extrinsic"`
}

// Neuron is one metagraph entry: a uid and the hotkey registered on it.
type Neuron struct {
	UID    uint16 `json:"uid"`
	Hotkey string `json:"hotkey"`
}

// Weight is one entry of a weight vector, in parts per million.
type Weight struct {
	UID uint16 `json:"uid"`
	PPM uint32 `json:"ppm"`
}

// WeightSet is a weight vector as the chain recorded it.
type WeightSet struct {
	Hotkey  string   `json:"hotkey"`
	Block   uint64   `json:"block"`
	Weights []Weight `json:"weights"`
}

// Chain is everything the validator needs from a chain: the finalized
// head, matched reveals in order, the metagraph, and weight submission with
// read-back. The embedded local chain implements it; a Substrate/Bittensor
// adapter is the seam for the real network (docs/market.md). Consumers
// declare the smaller interface they use.
type Chain interface {
	// Finalized returns the finalized head.
	Finalized(ctx context.Context) (Head, error)
	// Reveals returns the matched reveals strictly after pos and in blocks
	// at most upTo (which must not exceed the finalized head), in Position
	// order, at most limit of them (limit <= 0: no limit).
	Reveals(ctx context.Context, after Position, upTo uint64, limit int) ([]Reveal, error)
	// Metagraph returns the metagraph as of the finalized head.
	Metagraph(ctx context.Context) ([]Neuron, error)
	// SetWeights submits the validator's weight vector, signed by its
	// hotkey, and returns the extrinsic digest.
	SetWeights(ctx context.Context, weights []Weight) (string, error)
	// Weights reads back the last weight vector the hotkey set.
	Weights(ctx context.Context, hotkey string) (WeightSet, error)
}
