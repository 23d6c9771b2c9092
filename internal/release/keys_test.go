package release_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/release"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	repo := filepath.Join(dir, "repo")
	for _, d := range []string{state, filepath.Join(repo, ".git"), filepath.Join(repo, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(state, filepath.Join(dir, "state-link")); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing.key")
	if err := os.WriteFile(existing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, priv, wantErr string
	}{
		{"outside", filepath.Join(dir, "ok.key"), ""},
		{"into missing directories", filepath.Join(dir, "new", "keys", "ok.key"), ""},
		{"inside a git work tree", filepath.Join(repo, "sub", "release.key"), "git work tree"},
		{"inside the state directory", filepath.Join(state, "release.key"), "state directory"},
		{"inside the state directory through a link", filepath.Join(dir, "state-link", "keys", "release.key"), "state directory"},
		{"over an existing file", existing, "exists"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pubPath := filepath.Join(t.TempDir(), "pub.pem")
			_, err := release.Keygen(release.KeygenOptions{Private: c.priv, Public: pubPath, Forbidden: []string{state}})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(c.priv)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o600 {
				t.Fatalf("private key mode %v", info.Mode().Perm())
			}
			if d, err := os.Stat(filepath.Dir(c.priv)); err != nil || (d.Mode().Perm()&0o077 != 0 && c.name == "into missing directories") {
				t.Fatalf("key directory: %v %v (want 0700 when created)", d.Mode(), err)
			}
			if _, err := release.ReadPrivateKey(c.priv); err != nil {
				t.Fatal(err)
			}
			if _, err := release.ReadPublicKey(pubPath); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(c.priv, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := release.ReadPrivateKey(c.priv); err == nil || !strings.Contains(err.Error(), "chmod 600") {
				t.Fatalf("loose private key: %v", err)
			}
		})
	}
}

func TestPAE(t *testing.T) {
	// The example from the DSSE protocol description.
	got := string(release.PAE("http://example.com/HelloWorld", []byte("hello world")))
	want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
	if got != want {
		t.Fatalf("PAE %q, want %q", got, want)
	}
	if got := string(release.PAE("", nil)); got != "DSSEv1 0  0 " {
		t.Fatalf("empty PAE %q", got)
	}
}

func TestEnvelope(t *testing.T) {
	priv, pub, _, _ := keys(t)
	env := release.SignEnvelope(priv, release.PayloadType, []byte(`{"a":1}`))
	data, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := release.ReadEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := back.Verify(pub, release.PayloadType); err != nil || string(p) != `{"a":1}` {
		t.Fatalf("verify: %q %v", p, err)
	}
	other := func(f func(*release.Envelope)) release.Envelope {
		e := back
		e.Signatures = append([]release.Signature(nil), back.Signatures...)
		f(&e)
		return e
	}
	for _, c := range []struct {
		name    string
		env     release.Envelope
		wantErr string
	}{
		{"changed payload", other(func(e *release.Envelope) { e.Payload = base64.StdEncoding.EncodeToString([]byte(`{"a":2}`)) }), "does not verify"},
		{"changed type", other(func(e *release.Envelope) { e.PayloadType = "text/plain" }), "payloadType"},
		{"other key id", other(func(e *release.Envelope) { e.Signatures[0].KeyID = "someone" }), "no signature by key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.env.Verify(pub, release.PayloadType); err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
		})
	}
	for _, c := range []struct{ name, data, wantErr string }{
		{"unknown field", strings.Replace(string(data), `{"payload"`, `{"extra":1,"payload"`, 1), `unknown field "extra"`},
		{"duplicate", strings.Replace(string(data), `{"payload":`, `{"payload":"","payload":`, 1), "duplicate key"},
		{"missing signatures", `{"payload":"","payloadType":"x"}`, `missing field "signatures"`},
		{"no signatures", `{"payload":"","payloadType":"x","signatures":[]}`, "no signature"},
		{"bad base64", strings.Replace(string(data), `"payload":"`, `"payload":"!`, 1), "$.payload"},
		{"whitespace", strings.Replace(string(data), `{"payload"`, `{ "payload"`, 1), "not canonical"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := release.ReadEnvelope([]byte(c.data)); err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestKeygenLeavesNoHalfPair(t *testing.T) {
	dir := t.TempDir()
	priv := filepath.Join(dir, "o.key")
	// a private key into a directory keygen creates: on failure the
	// created directory goes too
	if _, err := release.Keygen(release.KeygenOptions{Private: filepath.Join(dir, "made", "o.key"), Public: filepath.Join(dir, "missing", "o.pub")}); err == nil {
		t.Fatal("public key in a missing directory: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); !os.IsNotExist(err) {
		t.Fatalf("the directory made for the private key was left behind (%v)", err)
	}
	for _, pub := range []string{filepath.Join(dir, "missing", "o.pub"), priv} {
		if _, err := release.Keygen(release.KeygenOptions{Private: priv, Public: pub}); err == nil {
			t.Fatalf("public key %s: no error", pub)
		}
		if _, err := os.Stat(priv); !os.IsNotExist(err) {
			t.Fatalf("public key %s failed but the private key was left behind (%v)", pub, err)
		}
	}
	// and the same --out works once the public key path is right
	if _, err := release.Keygen(release.KeygenOptions{Private: priv, Public: priv + ".pub"}); err != nil {
		t.Fatal(err)
	}
}
