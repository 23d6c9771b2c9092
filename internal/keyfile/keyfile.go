// Package keyfile reads and writes ed25519 key files: a PKCS#8 PEM private
// key (mode 0600, kept out of git work trees and named state directories)
// and its PKIX PEM public key. Release signing keys and miner hotkeys are
// both written and read here.
package keyfile

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Options says where keygen writes and where it must not.
type Options struct {
	// Private is the private key file (PKCS#8 PEM, mode 0600). It must not
	// exist yet, and must lie neither inside a git work tree nor inside
	// any of Forbidden. Missing directories above it are created (0700).
	Private string
	// Public is the public key file (PKIX PEM, mode 0644); it must not
	// exist yet.
	Public string
	// Forbidden lists directories (such as the state directory) that
	// must never hold a private key.
	Forbidden []string
	// Rand is the entropy source; nil means crypto/rand.
	Rand io.Reader
}

// Generate creates an ed25519 key pair and writes it as opts says. It returns
// the public key.
func Generate(opts Options) (ed25519.PublicKey, error) {
	if opts.Private == "" || opts.Public == "" {
		return nil, errors.New("keygen: both the private and the public key file are required")
	}
	if err := CheckLocation(opts.Private, opts.Forbidden); err != nil {
		return nil, fmt.Errorf("keygen: %w", err)
	}
	if filepath.Clean(opts.Private) == filepath.Clean(opts.Public) {
		return nil, errors.New("keygen: the private and the public key file are the same path")
	}
	pub, priv, err := ed25519.GenerateKey(opts.Rand)
	if err != nil {
		return nil, fmt.Errorf("keygen: generate: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("keygen: encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("keygen: encode public key: %w", err)
	}
	created, err := Mkdirs(filepath.Dir(opts.Private), 0o700)
	if err != nil {
		return nil, fmt.Errorf("keygen: private key directory: %w", err)
	}
	if err := WriteNew(opts.Private, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		RemoveDirs(created)
		return nil, fmt.Errorf("keygen: private key: %w", err)
	}
	if err := WriteNew(opts.Public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		// No half pair: the private key without its public key would
		// block the next try (files are never overwritten).
		os.Remove(opts.Private)
		RemoveDirs(created)
		return nil, fmt.Errorf("keygen: public key: %w", err)
	}
	return pub, nil
}

// Mkdirs creates dir and its missing parents with perm and returns the
// directories it created, outermost first.
func Mkdirs(dir string, perm os.FileMode) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		missing = append([]string{d}, missing...)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i, d := range missing {
		if err := os.Mkdir(d, perm); err != nil {
			RemoveDirs(missing[:i])
			return nil, err
		}
	}
	return missing, nil
}

// RemoveDirs removes directories Mkdirs created, innermost first (only
// while they are empty).
func RemoveDirs(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
}

// WriteNew creates path (which must not exist) with exactly perm.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

// CheckLocation refuses a private key path inside a git work tree (any
// ancestor directory holding .git) or inside one of forbidden.
func CheckLocation(keyPath string, forbidden []string) error {
	abs, err := resolved(keyPath)
	if err != nil {
		return fmt.Errorf("key location %s: %w", keyPath, err)
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return fmt.Errorf("key location %s: inside the git work tree %s; keep private keys out of repositories", keyPath, d)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	for _, f := range forbidden {
		if f == "" {
			continue
		}
		fa, err := resolved(f)
		if err != nil {
			return fmt.Errorf("key location: %s: %w", f, err)
		}
		if rel, err := filepath.Rel(fa, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("key location %s: inside the state directory %s; keep private keys out of it", keyPath, f)
		}
	}
	return nil
}

// resolved makes p absolute and resolves symlinks in its longest existing
// ancestor, so that a link cannot hide where a key lands.
func resolved(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for d := abs; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest), nil
		}
		if filepath.Dir(d) == d {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

// ReadPrivateKey reads a PKCS#8 PEM ed25519 private key. On Unix it refuses
// a key file that group or others may read or write.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	if info.IsDir() {
		return nil, fmt.Errorf("private key %s: is a directory, not a key file", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	priv, err := ParsePrivateKey(data)
	if errors.Is(err, errPublicKey) {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	// The mode is checked before the contents are judged, so a readable
	// key is reported as such even when it is also malformed.
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("private key %s: mode %v lets others read it; chmod 600 it", path, info.Mode().Perm())
	}
	if err != nil {
		return nil, fmt.Errorf("private key %s: %w", path, err)
	}
	return priv, nil
}

var errPublicKey = errors.New("this is a public key; sign with the private key keygen wrote")

// ParsePrivateKey parses a PKCS#8 PEM ed25519 private key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b != nil && b.Type == "PUBLIC KEY" {
		return nil, errPublicKey
	}
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM \"PRIVATE KEY\" block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		kind := "a non-ed25519"
		switch k.(type) {
		case *rsa.PrivateKey:
			kind = "an RSA"
		case *ecdsa.PrivateKey:
			kind = "an ECDSA"
		}
		return nil, fmt.Errorf("%s key; keys are ed25519", kind)
	}
	return priv, nil
}

// ParsePublicKey parses a PKIX PEM ed25519 public key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	b, rest := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM \"PUBLIC KEY\" block")
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("trailing data after the PEM block")
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%T is not an ed25519 key", k)
	}
	return pub, nil
}

// ReadPublicKey reads a PKIX PEM ed25519 public key file.
func ReadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, err := ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	return pub, nil
}
