// Package chain is the validator's view of a chain: the Chain interface
// (finalized head, matched reveals in order, metagraph, weights with
// read-back), its event types, and the canonical, size-capped payload a
// miner reveals (a packaged bundle's content hash and the URL its archive
// is served from). The embedded local chain (internal/market/localchain)
// implements Chain; a Substrate/Bittensor adapter is the seam for the real
// network (docs/market.md, "Chain").
package chain

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"cacheon/internal/bundle"
	"cacheon/internal/canon"
)

// MaxPayloadBytes is the chain's cap on a submission payload.
const MaxPayloadBytes = 1024

// Payload is the on-chain submission reference, version 1:
// canonical JSON {"h": content hash, "u": archive URL, "v": 1}.
type Payload struct {
	H string `json:"h"`
	U string `json:"u"`
	V int    `json:"v"`
}

// EncodePayload returns the canonical on-chain payload for a content hash
// and the URL the archive is served from.
func EncodePayload(contentHash, archiveURL string) ([]byte, error) {
	p := Payload{H: contentHash, U: archiveURL, V: 1}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	b, err := canon.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	if len(b) > MaxPayloadBytes {
		return nil, fmt.Errorf("encode payload: %d bytes exceeds the %d-byte chain cap (hint: use a shorter URL)", len(b), MaxPayloadBytes)
	}
	return b, nil
}

// ParsePayload strictly decodes on-chain payload bytes: at most
// MaxPayloadBytes, exactly canonical JSON (so no whitespace, duplicate keys
// or reordering) with exactly the keys h, u and v, v == 1, h 64 lowercase hex
// digits, and u an http:// or https:// URL with a host, no credentials, no
// fragment, and no whitespace or control characters.
func ParsePayload(b []byte) (Payload, error) {
	if len(b) > MaxPayloadBytes {
		return Payload{}, fmt.Errorf("parse payload: %d bytes exceeds the %d-byte cap", len(b), MaxPayloadBytes)
	}
	var p Payload
	if err := canon.Decode(b, &p); err != nil {
		return Payload{}, fmt.Errorf("parse payload: %w", err)
	}
	if err := p.check(); err != nil {
		return Payload{}, fmt.Errorf("parse payload: %w", err)
	}
	return p, nil
}

func (p Payload) check() error {
	if p.V != 1 {
		return fmt.Errorf("version %d is not supported (want 1)", p.V)
	}
	if err := bundle.CheckContentHash(p.H); err != nil {
		return fmt.Errorf("h: %w", err)
	}
	if err := checkArchiveURL(p.U); err != nil {
		return fmt.Errorf("u: %w", err)
	}
	return nil
}

// checkArchiveURL accepts an absolute http:// or https:// URL with a host,
// printable ASCII only, no user info and no fragment.
func checkArchiveURL(s string) error {
	if s == "" {
		return fmt.Errorf("empty URL")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("byte %#x at %d: URLs must be printable ASCII without spaces", c, i)
		}
	}
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		return fmt.Errorf("%q: scheme must be https:// or http://", clip(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %w", clip(s), err)
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q: no host", clip(s))
	case u.User != nil:
		return fmt.Errorf("%q: credentials are not allowed in the URL", clip(s))
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("%q: fragments are not allowed", clip(s))
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: invalid port %q", clip(s), clip(port))
		}
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}
