package keyfile

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenerateAndRead(t *testing.T) {
	dir := t.TempDir()
	priv := filepath.Join(dir, "k", "hotkey")
	pub, err := Generate(Options{Private: priv, Public: priv + ".pub"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := ReadPrivateKey(priv)
	if err != nil || !k.Public().(ed25519.PublicKey).Equal(pub) {
		t.Fatalf("read back: %v", err)
	}
	p, err := ReadPublicKey(priv + ".pub")
	if err != nil || !p.Equal(pub) {
		t.Fatalf("public key: %v", err)
	}
	if _, err := Generate(Options{Private: priv, Public: priv + ".pub2"}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("overwrite: %v", err)
	}
	if _, err := ReadPrivateKey(priv + ".pub"); err == nil || !strings.Contains(err.Error(), "public key") {
		t.Fatalf("public key as private: %v", err)
	}
	if err := os.Chmod(priv, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPrivateKey(priv); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("readable key: %v", err)
	}
}

func TestCheckLocation(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := CheckLocation(filepath.Join(dir, "sub", "key"), nil); err == nil || !strings.Contains(err.Error(), "git work tree") {
		t.Fatalf("inside a git tree: %v", err)
	}
	state := t.TempDir()
	if err := CheckLocation(filepath.Join(state, "key"), []string{state}); err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("inside the state directory: %v", err)
	}
}
