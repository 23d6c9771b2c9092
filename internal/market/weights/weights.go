// Package weights projects the validator's active reward claims onto a
// weight vector: integer parts per million that sum to exactly 1,000,000.
// It is a pure function of its input (claims, the current finalized block,
// the metagraph and the configuration): no I/O, no clock, no store.
//
// A claim's credit decays hyperbolically with its age in blocks:
//
//	credit = floor((speedup_ppm − 1,000,000) × h / (h + age))
//
// so a claim keeps half its credit at age h. Credits are summed per
// recipient hotkey; a recipient that is no longer in the metagraph is
// replaced, for that projection, by the validator's own hotkey. The
// million ppm are allocated by largest remainder, ties by hotkey. With no
// positive credit at all the configured burn target receives everything;
// the burn is refused as soon as any claim carries positive credit. A
// claim that cannot be read (a malformed claim or one from the future)
// fails the whole projection: nothing is silently redistributed.
package weights

import (
	"errors"
	"fmt"
	"math/big"
	"sort"

	"cacheon/internal/market/chain"
)

// Million is the total of every vector, and the speedup of no improvement.
const Million = 1_000_000

// Errors a caller may test for with errors.Is.
var (
	// ErrBadClaim: a claim cannot be projected (fails the whole vector).
	ErrBadClaim = errors.New("unreadable claim")
	// ErrNoRecipient: nobody can receive the weight (no claim and no burn
	// target, or the validator's own hotkey is needed but unregistered).
	ErrNoRecipient = errors.New("no recipient for the weight")
	// ErrBurnRefused: the burn target was asked for while a claim carries
	// positive credit.
	ErrBurnRefused = errors.New("burn refused: a claim carries positive credit")
)

// Claim is one active reward claim as settlement recorded it.
type Claim struct {
	// Hotkey is the recipient miner's hotkey.
	Hotkey string `json:"hotkey"`
	// SpeedupPPM is the crowned speedup in parts per million (1,500,000
	// is 1.5×); it must exceed Million.
	SpeedupPPM uint64 `json:"speedup_ppm"`
	// CrownedBlock is the block the claim counts from (the proposal's
	// submission block).
	CrownedBlock uint64 `json:"crowned_block"`
}

// Burn names the burn target: the uid and the hotkey the metagraph must
// show on it (uids are recycled, so both are checked).
type Burn struct {
	UID    uint16 `json:"uid"`
	Hotkey string `json:"hotkey"`
}

// Config is the projection's fixed configuration.
type Config struct {
	// HalfLife is h, in blocks: a claim keeps half its credit at age h.
	HalfLife uint64
	// Self is the validator's own hotkey; it stands in for recipients
	// that left the metagraph.
	Self string
	// Burn is the target of a vector with no positive credit (nil: none,
	// and such a projection fails with ErrNoRecipient).
	Burn *Burn
}

// Input is what one projection reads.
type Input struct {
	// Block is the current finalized block.
	Block uint64
	// Claims are the active claims; the order does not matter.
	Claims []Claim
	// Metagraph maps hotkeys to uids.
	Metagraph []chain.Neuron
	// ForceBurn asks for the burn target whatever the claims say; it is
	// refused (ErrBurnRefused) if any claim carries positive credit.
	ForceBurn bool
}

// Share is one recipient's part of a vector.
type Share struct {
	Hotkey string `json:"hotkey"`
	UID    uint16 `json:"uid"`
	// Credit is the recipient's summed credit (a decimal integer: it may
	// exceed 64 bits in sum).
	Credit string `json:"credit"`
	PPM    uint32 `json:"ppm"`
	// Substitute: the recipient is the validator standing in for these
	// hotkeys, which left the metagraph.
	Substitute []string `json:"substitute,omitempty"`
}

// Vector is a projection's result.
type Vector struct {
	Block uint64 `json:"block"`
	// Burn: no claim carried positive credit and the burn target got all.
	Burn bool `json:"burn"`
	// Shares are by hotkey, including recipients whose ppm is zero.
	Shares []Share `json:"shares"`
	// Weights are by uid, zero entries left out; the ppm sum to Million.
	Weights []chain.Weight `json:"weights"`
}

// Credit returns floor((speedupPPM − Million) × h / (h + age)), computed
// without overflow. speedupPPM must exceed Million and h must be positive.
func Credit(speedupPPM, h, age uint64) uint64 {
	if speedupPPM <= Million || h == 0 {
		return 0
	}
	num := new(big.Int).SetUint64(speedupPPM - Million)
	num.Mul(num, new(big.Int).SetUint64(h))
	den := new(big.Int).SetUint64(h)
	den.Add(den, new(big.Int).SetUint64(age))
	return num.Quo(num, den).Uint64() // at most speedupPPM − Million
}

// Project computes the vector for in under cfg.
func Project(cfg Config, in Input) (Vector, error) {
	if cfg.HalfLife == 0 {
		return Vector{}, fmt.Errorf("project weights: half-life of 0 blocks")
	}
	uidOf := make(map[string]uint16, len(in.Metagraph))
	for _, n := range in.Metagraph {
		if n.Hotkey == "" {
			return Vector{}, fmt.Errorf("project weights: metagraph uid %d has no hotkey", n.UID)
		}
		if _, dup := uidOf[n.Hotkey]; dup {
			return Vector{}, fmt.Errorf("project weights: metagraph lists hotkey %s twice", n.Hotkey)
		}
		uidOf[n.Hotkey] = n.UID
	}
	credits := map[string]*big.Int{}
	subs := map[string][]string{}
	positive := false
	for i, c := range in.Claims {
		switch {
		case c.Hotkey == "":
			return Vector{}, fmt.Errorf("project weights: claim %d: no hotkey: %w", i, ErrBadClaim)
		case c.SpeedupPPM <= Million:
			return Vector{}, fmt.Errorf("project weights: claim %d (%s): speedup %d ppm is not an improvement: %w", i, c.Hotkey, c.SpeedupPPM, ErrBadClaim)
		case c.CrownedBlock > in.Block:
			return Vector{}, fmt.Errorf("project weights: claim %d (%s): crowned at block %d, after the current block %d: %w", i, c.Hotkey, c.CrownedBlock, in.Block, ErrBadClaim)
		}
		cr := Credit(c.SpeedupPPM, cfg.HalfLife, in.Block-c.CrownedBlock)
		to := c.Hotkey
		if _, ok := uidOf[to]; !ok {
			if cfg.Self == "" {
				return Vector{}, fmt.Errorf("project weights: claim %d: %s left the metagraph and no validator hotkey is configured: %w", i, c.Hotkey, ErrNoRecipient)
			}
			subs[cfg.Self] = append(subs[cfg.Self], c.Hotkey)
			to = cfg.Self
		}
		if credits[to] == nil {
			credits[to] = new(big.Int)
		}
		credits[to].Add(credits[to], new(big.Int).SetUint64(cr))
		if cr > 0 {
			positive = true
		}
	}
	if in.ForceBurn && positive {
		return Vector{}, fmt.Errorf("project weights: %w", ErrBurnRefused)
	}
	if !positive {
		return burn(cfg, in, uidOf)
	}
	if _, ok := credits[cfg.Self]; ok {
		if _, reg := uidOf[cfg.Self]; !reg {
			return Vector{}, fmt.Errorf("project weights: the validator's hotkey %s stands in for deregistered recipients but is not in the metagraph: %w", cfg.Self, ErrNoRecipient)
		}
	}
	hotkeys := make([]string, 0, len(credits))
	for hk := range credits {
		hotkeys = append(hotkeys, hk)
	}
	sort.Strings(hotkeys)
	cs := make([]*big.Int, len(hotkeys))
	for i, hk := range hotkeys {
		cs[i] = credits[hk]
	}
	ppm := Allocate(cs)
	v := Vector{Block: in.Block}
	for i, hk := range hotkeys {
		s := subs[hk]
		sort.Strings(s)
		v.Shares = append(v.Shares, Share{Hotkey: hk, UID: uidOf[hk], Credit: cs[i].String(), PPM: ppm[i], Substitute: s})
	}
	v.Weights = weightsOf(v.Shares)
	return v, nil
}

func burn(cfg Config, in Input, uidOf map[string]uint16) (Vector, error) {
	if cfg.Burn == nil {
		return Vector{}, fmt.Errorf("project weights: no claim carries credit and no burn target is configured: %w", ErrNoRecipient)
	}
	uid, ok := uidOf[cfg.Burn.Hotkey]
	if !ok || uid != cfg.Burn.UID {
		return Vector{}, fmt.Errorf("project weights: burn target uid %d hotkey %s is not in the metagraph as configured: %w", cfg.Burn.UID, cfg.Burn.Hotkey, ErrNoRecipient)
	}
	v := Vector{Block: in.Block, Burn: true, Shares: []Share{{Hotkey: cfg.Burn.Hotkey, UID: uid, Credit: "0", PPM: Million}}}
	v.Weights = weightsOf(v.Shares)
	return v, nil
}

// weightsOf lists the positive shares by uid.
func weightsOf(shares []Share) []chain.Weight {
	ws := []chain.Weight{}
	for _, s := range shares {
		if s.PPM > 0 {
			ws = append(ws, chain.Weight{UID: s.UID, PPM: s.PPM})
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].UID < ws[j].UID })
	return ws
}

// Allocate splits Million in proportion to credits by largest remainder:
// each entry gets floor(credit × Million / total), and the ppm left over
// go one each to the largest remainders, ties to the earlier entry (the
// caller orders entries by hotkey). The result sums to Million when any
// credit is positive, and is all zero otherwise. Credits must not be
// negative.
func Allocate(credits []*big.Int) []uint32 {
	out := make([]uint32, len(credits))
	total := new(big.Int)
	for _, c := range credits {
		total.Add(total, c)
	}
	if total.Sign() == 0 {
		return out
	}
	rems := make([]*big.Int, len(credits))
	var given uint64
	mil := big.NewInt(Million)
	for i, c := range credits {
		q, r := new(big.Int), new(big.Int)
		q.QuoRem(new(big.Int).Mul(c, mil), total, r)
		out[i] = uint32(q.Uint64()) // at most Million
		given += q.Uint64()
		rems[i] = r
	}
	order := make([]int, len(credits))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rems[order[a]].Cmp(rems[order[b]]) > 0 })
	for k := 0; given < Million; k++ { // fewer left over than entries with a positive remainder
		out[order[k]]++
		given++
	}
	return out
}
