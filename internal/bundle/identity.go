package bundle

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"cacheon/internal/canon"
)

// Digest domains of the contribution identities (schema version 1 each).
const (
	SelectedPayloadDomain = "cacheon.selected_payload"
	SelectedDeltaDomain   = "cacheon.selected_delta"
	AttributionDomain     = "cacheon.attribution"
	identitySchema        = 1
)

// PayloadFile is one file of a selected payload, as hashed into its digest.
type PayloadFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// SelectedPayloadFiles hashes the named bundle files (slash-separated paths
// relative to dir) and returns them sorted bytewise by path, duplicates
// removed. Every path must be a safe relative path to a regular,
// non-symlink file that the content hash covers.
func SelectedPayloadFiles(dir string, paths []string) ([]PayloadFile, error) {
	root, err := resolveRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("selected payload: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("selected payload: no files selected")
	}
	uniq := append([]string(nil), paths...)
	sort.Strings(uniq)
	out := make([]PayloadFile, 0, len(uniq))
	for i, p := range uniq {
		if i > 0 && p == uniq[i-1] {
			continue
		}
		if err := checkRelPath(p); err != nil {
			return nil, fmt.Errorf("selected payload: %q: %w", p, err)
		}
		if Excluded(p) {
			return nil, fmt.Errorf("selected payload: %q is not covered by the content hash", p)
		}
		if err := checkNoSymlinks(root, p); err != nil {
			return nil, fmt.Errorf("selected payload: %w", err)
		}
		sum, size, err := fileSHA256(root, p)
		if err != nil {
			return nil, fmt.Errorf("selected payload: hash %s: %w", p, err)
		}
		out = append(out, PayloadFile{Path: p, SHA256: sum, Size: size})
	}
	return out, nil
}

// SelectedPayloadDigest is the identity of exactly the bytes a target's
// rows need: canon.Digest("cacheon.selected_payload", 1, files) over the
// sorted [{path, sha256, size}] list of SelectedPayloadFiles. Use
// Bundle.SelectedPaths to name the files.
func SelectedPayloadDigest(dir string, paths []string) (string, error) {
	files, err := SelectedPayloadFiles(dir, paths)
	if err != nil {
		return "", err
	}
	d, err := canon.Digest(SelectedPayloadDomain, identitySchema, files)
	if err != nil {
		return "", fmt.Errorf("selected payload: %w", err)
	}
	return d, nil
}

// selectedDelta is the payload of the selected-delta digest.
type selectedDelta struct {
	Target           string `json:"target"`
	TargetSpecDigest string `json:"target_spec_digest"`
	SelectedPayload  string `json:"selected_payload"`
}

// SelectedDeltaDigest is the identity of one target transition:
// canon.Digest("cacheon.selected_delta", 1, {target, target_spec_digest,
// selected_payload}).
func SelectedDeltaDigest(target, targetSpecDigest, selectedPayload string) (string, error) {
	if err := checkTargetName(target); err != nil {
		return "", fmt.Errorf("selected delta: target: %w", err)
	}
	if err := canon.ValidDigest(targetSpecDigest); err != nil {
		return "", fmt.Errorf("selected delta: target_spec_digest: %w", err)
	}
	if err := canon.ValidDigest(selectedPayload); err != nil {
		return "", fmt.Errorf("selected delta: selected_payload: %w", err)
	}
	d, err := canon.Digest(SelectedDeltaDomain, identitySchema, selectedDelta{target, targetSpecDigest, selectedPayload})
	if err != nil {
		return "", fmt.Errorf("selected delta: %w", err)
	}
	return d, nil
}

// attribution is the payload of the attribution digest.
type attribution struct {
	SelectedDelta string `json:"selected_delta"`
	Miner         string `json:"miner"`
	ContentHash   string `json:"content_hash"`
}

// AttributionDigest binds a selected delta to the miner (hotkey) who
// committed the bundle with contentHash: canon.Digest("cacheon.attribution",
// 1, {selected_delta, miner, content_hash}).
func AttributionDigest(selectedDelta, miner, contentHash string) (string, error) {
	if err := canon.ValidDigest(selectedDelta); err != nil {
		return "", fmt.Errorf("attribution: selected_delta: %w", err)
	}
	if err := checkHotkey(miner); err != nil {
		return "", fmt.Errorf("attribution: miner: %w", err)
	}
	if err := validHex64(contentHash); err != nil {
		return "", fmt.Errorf("attribution: content_hash: %w", err)
	}
	d, err := canon.Digest(AttributionDomain, identitySchema, attribution{selectedDelta, miner, contentHash})
	if err != nil {
		return "", fmt.Errorf("attribution: %w", err)
	}
	return d, nil
}

func checkHotkey(s string) error {
	if s == "" || len(s) > 256 {
		return fmt.Errorf("want 1 to 256 bytes, got %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("byte %#x at %d is not printable ASCII", c, i)
		}
	}
	return nil
}

// MaxPayloadBytes is the chain's cap on a submission payload.
const MaxPayloadBytes = 1024

// ChainPayload is the on-chain submission reference, version 1:
// canonical JSON {"h": content hash, "u": archive URL, "v": 1}.
type ChainPayload struct {
	H string `json:"h"`
	U string `json:"u"`
	V int    `json:"v"`
}

// EncodePayload returns the canonical on-chain payload for a content hash
// and the URL the archive is served from.
func EncodePayload(contentHash, archiveURL string) ([]byte, error) {
	p := ChainPayload{H: contentHash, U: archiveURL, V: 1}
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
func ParsePayload(b []byte) (ChainPayload, error) {
	if len(b) > MaxPayloadBytes {
		return ChainPayload{}, fmt.Errorf("parse payload: %d bytes exceeds the %d-byte cap", len(b), MaxPayloadBytes)
	}
	var p ChainPayload
	if err := canon.Decode(b, &p); err != nil {
		return ChainPayload{}, fmt.Errorf("parse payload: %w", err)
	}
	if err := p.check(); err != nil {
		return ChainPayload{}, fmt.Errorf("parse payload: %w", err)
	}
	return p, nil
}

func (p ChainPayload) check() error {
	if p.V != 1 {
		return fmt.Errorf("version %d is not supported (want 1)", p.V)
	}
	if err := validHex64(p.H); err != nil {
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
		return fmt.Errorf("%q: scheme must be https:// or http://", clipName(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q: %w", clipName(s), err)
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q: no host", clipName(s))
	case u.User != nil:
		return fmt.Errorf("%q: credentials are not allowed in the URL", clipName(s))
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("%q: fragments are not allowed", clipName(s))
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: invalid port %q", clipName(s), clipName(port))
		}
	}
	return nil
}
