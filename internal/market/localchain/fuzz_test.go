package localchain

import (
	"strings"
	"testing"

	"cacheon/internal/canon"
)

func canonMarshal(x Extrinsic) (string, error) {
	b, err := canon.Marshal(x)
	return string(b), err
}

// flipHex changes the first hex digit of s.
func flipHex(s string) string {
	if s[0] == '0' {
		return "1" + s[1:]
	}
	return "0" + s[1:]
}

// FuzzParseExtrinsic: an accepted extrinsic re-encodes to exactly its
// bytes (one spelling per extrinsic) and verifies; nothing panics.
func FuzzParseExtrinsic(f *testing.F) {
	k := key("fuzz")
	g := contentHash("genesis")
	for _, c := range []Call{
		{Kind: KindRegister, Chain: g},
		{Kind: KindCommit, Chain: g, Nonce: 1, Commitment: contentHash("c")},
		{Kind: KindReveal, Chain: g, Nonce: 2, Commitment: contentHash("c"), H: contentHash("h"), U: "https://e.com/b", Salt: contentHash("s")},
	} {
		x, err := Sign(c, k)
		if err != nil {
			f.Fatal(err)
		}
		s, _ := canonMarshal(x)
		f.Add([]byte(s))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"call":{"kind":"register"},"signature":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := ParseExtrinsic(b)
		if err != nil {
			return
		}
		again, err := canonMarshal(x)
		if err != nil || again != string(b) {
			t.Fatalf("accepted %q, which encodes as %q (%v)", b, again, err)
		}
		if err := x.Check(); err != nil {
			t.Fatalf("accepted %q, which fails Check: %v", b, err)
		}
	})
}

// FuzzParseRevealsQuery: an accepted query has up_to and a limit in range;
// nothing panics.
func FuzzParseRevealsQuery(f *testing.F) {
	for _, s := range []string{"up_to=3", "after_block=1&after_index=2&up_to=3&limit=10", "up_to=01", "up_to=1&up_to=2", "limit=0&up_to=1", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := parseRevealsQuery(s)
		if err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > MaxRevealsPage || !strings.Contains(s, "up_to=") {
			t.Fatalf("accepted %q as %+v", s, q)
		}
	})
}

// FuzzDecodeAnswer: the client's decoders of node answers never panic,
// and a refusal they build always carries a code and a message.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add(400, []byte(`{"error":"nope","code":"malformed"}`))
	f.Add(500, []byte(`{"error":"db","code":"internal"}`))
	f.Add(200, []byte(`[{"pos":{"block":1,"index":0},"hotkey":"a","content_hash":"b","url":"c","commit_block":1,"extrinsic":"d"}]`))
	f.Add(200, []byte(`{"number":1,"hash":"x"} trailing`))
	f.Fuzz(func(t *testing.T, status int, b []byte) {
		var info Info
		_ = decodeBody(b, &info)
		var r Receipt
		_ = decodeBody(b, &r)
		err := decodeError(status, b)
		if err == nil {
			t.Fatal("decodeError returned nil")
		}
		var re *RefusedError
		if asRefused(err, &re) && (re.Code == "" || re.Error() == "") {
			t.Fatalf("refusal without code or message: %#v", re)
		}
	})
}

func asRefused(err error, re **RefusedError) bool {
	r, ok := err.(*RefusedError)
	*re = r
	return ok
}
