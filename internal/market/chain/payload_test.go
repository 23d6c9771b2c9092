package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestPayloadRoundTrip(t *testing.T) {
	h := sha("bundle")
	b, err := EncodePayload(h, "https://example.com/b/"+h+".tar.gz")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"h":"` + h + `","u":"https://example.com/b/` + h + `.tar.gz","v":1}`
	if string(b) != want {
		t.Fatalf("payload %s, want %s", b, want)
	}
	p, err := ParsePayload(b)
	if err != nil || p.H != h || p.V != 1 {
		t.Fatalf("ParsePayload = %+v, %v", p, err)
	}
	if _, err := EncodePayload(h, "https://example.com/"+strings.Repeat("x", 1000)); err == nil || !strings.Contains(err.Error(), "1024-byte") {
		t.Fatalf("oversized payload: %v", err)
	}
}

func TestParsePayloadRejects(t *testing.T) {
	h := sha("bundle")
	u := "https://example.com/b.tar.gz"
	tests := []struct {
		name, in, want string
	}{
		{"not JSON", `nope`, "parse payload"},
		{"whitespace", `{"h": "` + h + `","u":"` + u + `","v":1}`, "not canonical"},
		{"key order", `{"v":1,"h":"` + h + `","u":"` + u + `"}`, "not canonical"},
		{"duplicate key", `{"h":"` + h + `","h":"` + h + `","u":"` + u + `","v":1}`, "duplicate key"},
		{"unknown key", `{"h":"` + h + `","p":1,"u":"` + u + `","v":1}`, "parse payload"},
		{"missing key", `{"h":"` + h + `","v":1}`, "parse payload"},
		{"version 2", `{"h":"` + h + `","u":"` + u + `","v":2}`, "version 2 is not supported"},
		{"version string", `{"h":"` + h + `","u":"` + u + `","v":"1"}`, "parse payload"},
		{"float version", `{"h":"` + h + `","u":"` + u + `","v":1.0}`, "parse payload"},
		{"upper-case hash", `{"h":"` + strings.ToUpper(h) + `","u":"` + u + `","v":1}`, "h: character"},
		{"short hash", `{"h":"abc","u":"` + u + `","v":1}`, "h: want 64"},
		{"file URL", `{"h":"` + h + `","u":"file:///tmp/b.tar.gz","v":1}`, "scheme must be https:// or http://"},
		{"ftp URL", `{"h":"` + h + `","u":"ftp://example.com/b","v":1}`, "scheme must be"},
		{"no host", `{"h":"` + h + `","u":"https:///b.tar.gz","v":1}`, "no host"},
		{"credentials", `{"h":"` + h + `","u":"https://user:pw@example.com/b","v":1}`, "credentials"},
		{"fragment", `{"h":"` + h + `","u":"https://example.com/b#frag","v":1}`, "fragments"},
		{"space in URL", `{"h":"` + h + `","u":"https://example.com/a b","v":1}`, "printable ASCII"},
		{"control in URL", `{"h":"` + h + `","u":"https://example.com/a\u0001","v":1}`, "printable ASCII"},
		{"non-ASCII URL", `{"h":"` + h + `","u":"https://exämple.com/","v":1}`, "printable ASCII"},
		{"bad port", `{"h":"` + h + `","u":"https://example.com:99999999999/","v":1}`, "u:"},
		{"too large", `{"h":"` + h + `","u":"https://example.com/` + strings.Repeat("x", 1024) + `","v":1}`, "exceeds the 1024-byte cap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePayload([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
			t.Log(err)
		})
	}
	if _, err := ParsePayload([]byte(`{"h":"` + h + `","u":"http://example.com/b","v":1}`)); err != nil {
		t.Fatalf("http URL rejected: %v", err)
	}
}

// FuzzParsePayload: a payload ParsePayload accepts re-encodes to exactly the
// bytes it came from (the chain payload is canonical, so there is one
// spelling of each), and nothing panics.
func FuzzParsePayload(f *testing.F) {
	h := strings.Repeat("ab", 32)
	f.Add([]byte(`{"h":"` + h + `","u":"https://example.com/b/` + h + `.tar.gz","v":1}`))
	f.Add([]byte(`{"h":"` + h + `","u":"http://x","v":2}`))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePayload(b)
		if err != nil {
			return
		}
		again, err := EncodePayload(p.H, p.U)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it again: %v", b, err)
		}
		if string(again) != string(b) {
			t.Fatalf("accepted %q, which encodes as %q", b, again)
		}
	})
}
