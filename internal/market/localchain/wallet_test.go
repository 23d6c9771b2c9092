package localchain

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
)

// TestWalletBadKey: a wallet or a signature over a key that is not an
// ed25519 private key is an error, never a panic.
func TestWalletBadKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  ed25519.PrivateKey
	}{
		{"nil", nil},
		{"short", make(ed25519.PrivateKey, 10)},
		{"a seed only", make(ed25519.PrivateKey, ed25519.SeedSize)},
		{"long", make(ed25519.PrivateKey, 65)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Sign(Call{Kind: KindRegister}, tc.key); err == nil || !strings.Contains(err.Error(), "not an ed25519 private key") {
				t.Errorf("Sign: %v; want not an ed25519 private key", err)
			}
			// No backend: the key is refused before the chain is asked.
			w := NewWallet(nil, tc.key, 0)
			if h := w.Hotkey(); h != "" {
				t.Errorf("Hotkey %q; want none", h)
			}
			if _, err := w.Register(context.Background()); err == nil || !strings.Contains(err.Error(), "not an ed25519 private key") {
				t.Errorf("Register: %v; want not an ed25519 private key", err)
			}
			if _, err := w.SetWeights(context.Background(), nil); err == nil {
				t.Error("SetWeights: no error")
			}
		})
	}
}
