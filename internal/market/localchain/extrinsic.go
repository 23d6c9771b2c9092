package localchain

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"cacheon/internal/canon"
	"cacheon/internal/market/chain"
)

// Extrinsic kinds.
const (
	KindRegister   = "register"
	KindCommit     = "commit"
	KindReveal     = "reveal"
	KindSetWeights = "set_weights"
)

// Domains of the local chain's digests (canon.Digest, schema version 1).
const (
	CallDomain       = "cacheon.localchain.call"
	ExtrinsicDomain  = "cacheon.localchain.extrinsic"
	CommitmentDomain = "cacheon.localchain.commitment"
	BlockDomain      = "cacheon.localchain.block"
	RootDomain       = "cacheon.localchain.extrinsics_root"
	GenesisDomain    = "cacheon.localchain.genesis"
)

// MaxExtrinsicBytes caps one signed extrinsic's canonical encoding.
const MaxExtrinsicBytes = 16 << 10

// MaxWeights caps the entries of one set_weights call.
const MaxWeights = 1024

// Call is what a hotkey signs. Chain is the genesis hash of the chain the
// call is meant for (no replay on another chain); Nonce is the hotkey's
// next nonce (no replay on this one). The remaining fields depend on Kind:
// commit carries Commitment; reveal carries Commitment, H, U and Salt;
// set_weights carries Weights; register carries nothing more.
type Call struct {
	Kind       string         `json:"kind"`
	Chain      string         `json:"chain"`
	Hotkey     string         `json:"hotkey"`
	Nonce      uint64         `json:"nonce"`
	Commitment string         `json:"commitment,omitempty"`
	H          string         `json:"h,omitempty"`
	U          string         `json:"u,omitempty"`
	Salt       string         `json:"salt,omitempty"`
	Weights    []chain.Weight `json:"weights,omitempty"`
}

// Extrinsic is a signed call: Signature is the hotkey's ed25519 signature
// (lowercase hex) over the 32 raw bytes of CallDigest(Call).
type Extrinsic struct {
	Call      Call   `json:"call"`
	Signature string `json:"signature"`
}

// CallDigest is the domain-separated digest a hotkey signs.
func CallDigest(c Call) (string, error) {
	return canon.Digest(CallDomain, 1, c)
}

// ID is the extrinsic's digest (unique per signed extrinsic, since nonces
// never repeat for a hotkey).
func (x Extrinsic) ID() (string, error) {
	return canon.Digest(ExtrinsicDomain, 1, x)
}

// commitmentPayload is what a commitment digest binds.
type commitmentPayload struct {
	H      string `json:"h"`
	Hotkey string `json:"hotkey"`
	Salt   string `json:"salt"`
	U      string `json:"u"`
}

// CommitmentDigest binds a content hash, the archive URL, the committing
// hotkey and a secret salt: canon.Digest(CommitmentDomain, 1,
// {h, hotkey, salt, u}). Until the reveal, the digest says nothing about
// the payload; the hotkey inside it means nobody can reveal another
// miner's commitment as their own.
func CommitmentDigest(h, u, hotkey, salt string) (string, error) {
	if _, err := chain.EncodePayload(h, u); err != nil {
		return "", fmt.Errorf("commitment: %w", err)
	}
	if err := checkHotkey(hotkey); err != nil {
		return "", fmt.Errorf("commitment: hotkey: %w", err)
	}
	if err := checkSalt(salt); err != nil {
		return "", fmt.Errorf("commitment: salt: %w", err)
	}
	return canon.Digest(CommitmentDomain, 1, commitmentPayload{H: h, Hotkey: hotkey, Salt: salt, U: u})
}

// NewSalt returns a fresh 32-byte salt in lowercase hex (r nil:
// crypto/rand).
func NewSalt(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [32]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Hotkey is the local chain's name for an ed25519 public key: 64 lowercase
// hex digits.
func Hotkey(pub ed25519.PublicKey) string { return hex.EncodeToString(pub) }

// Sign returns the extrinsic for c signed with key; c.Hotkey is set from
// the key.
func Sign(c Call, key ed25519.PrivateKey) (Extrinsic, error) {
	if len(key) != ed25519.PrivateKeySize {
		return Extrinsic{}, errors.New("sign: not an ed25519 private key")
	}
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok {
		return Extrinsic{}, errors.New("sign: not an ed25519 private key")
	}
	c.Hotkey = Hotkey(pub)
	d, err := CallDigest(c)
	if err != nil {
		return Extrinsic{}, fmt.Errorf("sign: %w", err)
	}
	raw, _ := hex.DecodeString(d)
	return Extrinsic{Call: c, Signature: hex.EncodeToString(ed25519.Sign(key, raw))}, nil
}

// ParseExtrinsic strictly decodes a signed extrinsic: at most
// MaxExtrinsicBytes of exactly canonical JSON with no unknown fields, a
// well-formed call for its kind and a valid signature by the call's
// hotkey. Whether the chain's state accepts it (nonce, registration,
// commitments) is the chain's check at submission.
func ParseExtrinsic(b []byte) (Extrinsic, error) {
	if len(b) > MaxExtrinsicBytes {
		return Extrinsic{}, fmt.Errorf("extrinsic: %d bytes exceeds the %d-byte cap", len(b), MaxExtrinsicBytes)
	}
	var x Extrinsic
	if err := canon.Decode(b, &x); err != nil {
		return Extrinsic{}, fmt.Errorf("extrinsic: %w", err)
	}
	if err := x.Check(); err != nil {
		return Extrinsic{}, err
	}
	return x, nil
}

// Check validates the extrinsic's shape and signature.
func (x Extrinsic) Check() error {
	c := x.Call
	if err := checkHotkey(c.Hotkey); err != nil {
		return fmt.Errorf("extrinsic: hotkey: %w", err)
	}
	if err := canon.ValidDigest(c.Chain); err != nil {
		return fmt.Errorf("extrinsic: chain: %w", err)
	}
	if err := c.checkFields(); err != nil {
		return fmt.Errorf("extrinsic %s: %w", c.Kind, err)
	}
	sig, err := hex.DecodeString(x.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize || hex.EncodeToString(sig) != x.Signature {
		return errors.New("extrinsic: signature: want 128 lowercase hex digits")
	}
	d, err := CallDigest(c)
	if err != nil {
		return fmt.Errorf("extrinsic: %w", err)
	}
	raw, _ := hex.DecodeString(d)
	pub, _ := hex.DecodeString(c.Hotkey)
	if !ed25519.Verify(ed25519.PublicKey(pub), raw, sig) {
		return ErrBadSignature
	}
	return nil
}

// ErrBadSignature is a signature that does not verify under the call's
// hotkey.
var ErrBadSignature = errors.New("extrinsic: the signature does not verify under the call's hotkey")

// checkFields requires exactly the fields the call's kind uses.
func (c Call) checkFields() error {
	has := map[string]bool{
		"commitment": c.Commitment != "", "h": c.H != "", "u": c.U != "",
		"salt": c.Salt != "", "weights": len(c.Weights) > 0,
	}
	var want []string
	switch c.Kind {
	case KindRegister:
	case KindCommit:
		want = []string{"commitment"}
	case KindReveal:
		want = []string{"commitment", "h", "u", "salt"}
	case KindSetWeights:
		want = []string{"weights"}
	default:
		return fmt.Errorf("unknown kind %q (want register, commit, reveal or set_weights)", clip(c.Kind))
	}
	for _, f := range want {
		if !has[f] {
			return fmt.Errorf("missing field %q", f)
		}
		delete(has, f)
	}
	for _, f := range []string{"commitment", "h", "u", "salt", "weights"} {
		if has[f] {
			return fmt.Errorf("field %q does not belong to this kind", f)
		}
	}
	if c.Commitment != "" {
		if err := canon.ValidDigest(c.Commitment); err != nil {
			return fmt.Errorf("commitment: %w", err)
		}
	}
	if c.Kind == KindReveal {
		if _, err := chain.EncodePayload(c.H, c.U); err != nil {
			return err
		}
		if err := checkSalt(c.Salt); err != nil {
			return fmt.Errorf("salt: %w", err)
		}
	}
	if c.Kind == KindSetWeights {
		return checkWeights(c.Weights)
	}
	return nil
}

// checkWeights: at most MaxWeights entries, uids strictly increasing,
// each ppm at most one million and the sum at most one million.
func checkWeights(ws []chain.Weight) error {
	if len(ws) > MaxWeights {
		return fmt.Errorf("weights: %d entries exceed the cap of %d", len(ws), MaxWeights)
	}
	var sum uint64
	for i, w := range ws {
		if i > 0 && w.UID <= ws[i-1].UID {
			return fmt.Errorf("weights: uid %d at %d: uids must be strictly increasing", w.UID, i)
		}
		if w.PPM > 1_000_000 {
			return fmt.Errorf("weights: uid %d: %d ppm exceeds one million", w.UID, w.PPM)
		}
		sum += uint64(w.PPM)
	}
	if sum > 1_000_000 {
		return fmt.Errorf("weights: the entries sum to %d ppm, more than one million", sum)
	}
	return nil
}

// checkHotkey: 64 lowercase hex digits (a raw ed25519 public key).
func checkHotkey(s string) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize || hex.EncodeToString(b) != s {
		return fmt.Errorf("%q: want 64 lowercase hex digits (an ed25519 public key)", clip(s))
	}
	return nil
}

// checkSalt: 64 lowercase hex digits (32 bytes).
func checkSalt(s string) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 || hex.EncodeToString(b) != s {
		return errors.New("want 64 lowercase hex digits (32 random bytes)")
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
