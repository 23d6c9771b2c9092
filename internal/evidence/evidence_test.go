package evidence

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

type wave struct {
	Index   int    `json:"index"`
	Nanos   int64  `json:"nanos"`
	Tokens  int    `json:"tokens"`
	Comment string `json:"comment,omitempty"`
}

func TestPutLoad(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "ev"))
	if err != nil {
		t.Fatal(err)
	}
	w := wave{Index: 2, Nanos: 123456789, Tokens: 64}
	r, err := s.Put("referee.wave", w)
	if err != nil {
		t.Fatal(err)
	}
	data, want, err := Encode("referee.wave", w)
	if err != nil || r != want {
		t.Fatalf("Put ref %v, Encode ref %v (%v)", r, want, err)
	}
	if string(data) != `{"domain":"referee.wave","payload":{"index":2,"nanos":123456789,"tokens":64},"schema_version":1}` {
		t.Fatalf("envelope %s", data)
	}
	p := filepath.Join(s.Root(), "referee.wave", r.Digest[:2], r.Digest)
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o400 {
		t.Fatalf("stored file %s: %v %v", p, st.Mode(), err)
	}
	got, err := Load[wave](s, r)
	if err != nil || got != w {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	// Sealing the same object again is a no-op; the ref round-trips.
	if r2, err := s.Put("referee.wave", w); err != nil || r2 != r {
		t.Fatalf("second Put: %v %v", r2, err)
	}
	if back, err := ParseRef(r.String()); err != nil || back != r {
		t.Fatalf("ParseRef(%s) = %v %v", r, back, err)
	}
	// The payload is decoded strictly as the type asked for.
	type other struct {
		Index int `json:"index"`
	}
	if _, err := Load[other](s, r); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("decoding as a narrower type: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

// TestTamper: any changed byte, a replaced file, a symlink, a wrong domain
// or an oversized object is an error on open, never a value.
func TestTamper(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, s *Store, r Ref, p string)
		want   string
	}{
		{"one byte", func(t *testing.T, s *Store, r Ref, p string) {
			b, _ := os.ReadFile(p)
			b[len(b)-3] ^= 1
			rewrite(t, p, b)
		}, "digest mismatch"},
		{"re-sealed under the same name", func(t *testing.T, s *Store, r Ref, p string) {
			b, _, _ := Encode(r.Domain, wave{Index: 9})
			rewrite(t, p, b)
		}, "digest mismatch"},
		{"symlink", func(t *testing.T, s *Store, r Ref, p string) {
			other := filepath.Join(t.TempDir(), "x")
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(other, b, 0o400); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, p); err != nil {
				t.Fatal(err)
			}
		}, "open"},
		{"removed", func(t *testing.T, s *Store, r Ref, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, "no such file"},
		{"over the bound", func(t *testing.T, s *Store, r Ref, p string) { s.MaxBytes = 16 }, "bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Put("referee.wave", wave{Index: 1, Nanos: 5, Tokens: 7})
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, s, r, s.path(r))
			if _, err := Load[wave](s, r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load after %s: %v, want an error with %q", tc.name, err, tc.want)
			}
		})
	}
}

func rewrite(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o400); err != nil {
		t.Fatal(err)
	}
}

func TestRefs(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"referee.plan:" + sha, true},
		{"referee.plan", false},
		{"../x:" + sha, false},
		{"Referee:" + sha, false},
		{"referee.plan:" + sha[:63], false},
		{"referee.plan:" + strings.ToUpper(sha), false},
	} {
		if _, err := ParseRef(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseRef(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
	if _, err := (&Store{root: t.TempDir()}).Put("../escape", wave{}); err == nil {
		t.Error("a domain that is a path was accepted")
	}
}

// TestConcurrentPut: writers racing to seal one object all succeed and
// leave one file.
func TestConcurrentPut(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Put("referee.wave", wave{Index: 3})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzDecode: whatever bytes sit in a store, reading them as evidence is an
// error or a value whose re-encoding is exactly those bytes.
func FuzzDecode(f *testing.F) {
	good, _, _ := Encode("referee.wave", wave{Index: 1, Nanos: 2, Tokens: 3, Comment: "x"})
	f.Add(good)
	f.Add([]byte(`{"domain":"referee.wave","payload":{"index":1.5},"schema_version":1}`))
	f.Add([]byte(`{"domain":"referee.wave","payload":{},"schema_version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, r, _ := Encode("referee.wave", wave{})
		r.Digest = sha256Hex(data)
		w, err := Decode[wave](r, data)
		if err != nil {
			return
		}
		again, _, err := Encode("referee.wave", w)
		if err != nil || string(again) != string(data) {
			t.Fatalf("decoded %+v from %q, which re-encodes as %q (%v)", w, data, again, err)
		}
	})
}
