package release

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"

	"cacheon/internal/keyfile"
)

// KeyID identifies an ed25519 public key: the lowercase hex SHA-256 of its
// 32 raw bytes.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// KeygenOptions says where keygen writes and where it must not (see
// keyfile.Options).
type KeygenOptions = keyfile.Options

// Keygen creates an ed25519 key pair and writes it as opts says. It returns
// the public key.
func Keygen(opts KeygenOptions) (ed25519.PublicKey, error) { return keyfile.Generate(opts) }

// CheckKeyLocation refuses a private key path inside a git work tree or
// inside one of forbidden.
func CheckKeyLocation(keyPath string, forbidden []string) error {
	return keyfile.CheckLocation(keyPath, forbidden)
}

// ReadPrivateKey reads a PKCS#8 PEM ed25519 private key (see
// keyfile.ReadPrivateKey).
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) { return keyfile.ReadPrivateKey(path) }

// ParsePrivateKey parses a PKCS#8 PEM ed25519 private key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) { return keyfile.ParsePrivateKey(data) }

// ParsePublicKey parses a PKIX PEM ed25519 public key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) { return keyfile.ParsePublicKey(data) }

// ReadPublicKey reads a PKIX PEM ed25519 public key file.
func ReadPublicKey(path string) (ed25519.PublicKey, error) { return keyfile.ReadPublicKey(path) }

// writeNew creates path (which must not exist) with exactly perm.
func writeNew(path string, data []byte, perm os.FileMode) error {
	return keyfile.WriteNew(path, data, perm)
}
