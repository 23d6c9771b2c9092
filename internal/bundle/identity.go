package bundle

import (
	"fmt"
	"sort"

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
	if err := CheckContentHash(contentHash); err != nil {
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
