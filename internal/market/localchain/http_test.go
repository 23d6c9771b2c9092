package localchain

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"cacheon/internal/market/chain"
)

func serveTest(t *testing.T, opts Options) (*Chain, *Client) {
	t.Helper()
	c := openTest(t, t.TempDir(), opts)
	srv := httptest.NewServer(NewHandler(c))
	t.Cleanup(srv.Close)
	cl, err := NewClient(srv.URL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

// TestHTTPRoundTrip runs register → commit → reveal → set_weights through
// the client, as the miner CLI and a validator in another process do.
func TestHTTPRoundTrip(t *testing.T) {
	ctx := context.Background()
	vk := key("validator")
	c, cl := serveTest(t, Options{Finality: 1, Validators: []string{hotkeyOf(vk)}})
	miner := NewWallet(cl, key("miner"), 0)
	if _, err := miner.Register(ctx); err != nil {
		t.Fatal(err)
	}
	v := NewWallet(cl, vk, 0)
	if _, err := v.Register(ctx); err != nil {
		t.Fatal(err)
	}
	h, u := contentHash("bundle"), "https://example.com/b.tar.gz"
	salt, _ := NewSalt(nil)
	d, _ := CommitmentDigest(h, u, miner.Hotkey(), salt)
	rc, err := miner.Commit(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, c, 1)
	got, err := miner.WaitIncluded(ctx, rc.ID)
	if err != nil || got.Pos != (chain.Position{Block: 1, Index: 2}) {
		t.Fatalf("commit receipt %+v %v", got, err)
	}
	_, err = miner.Reveal(ctx, d, h, u, salt)
	if Refusal(err) != CodeNotFinal {
		t.Fatalf("reveal before finality over HTTP: %v", err)
	}
	produce(t, c, 1)
	if _, err := miner.Reveal(ctx, d, contentHash("other"), u, salt); Refusal(err) != CodeMismatch || !strings.Contains(err.Error(), "does not match commitment") {
		t.Fatalf("mismatched reveal over HTTP: %v", err)
	}
	if _, err := miner.Reveal(ctx, d, h, u, salt); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SetWeights(ctx, []chain.Weight{{UID: 0, PPM: 1_000_000}}); err != nil {
		t.Fatal(err)
	}
	produce(t, c, 2)
	f, err := cl.Finalized(ctx)
	if err != nil || f.Number != 3 {
		t.Fatalf("finalized %+v %v", f, err)
	}
	revs, err := v.Reveals(ctx, chain.Position{}, f.Number, 0)
	if err != nil || len(revs) != 1 || revs[0].ContentHash != h || revs[0].CommitBlock != 1 || revs[0].Pos.Block != 3 {
		t.Fatalf("reveals %+v %v", revs, err)
	}
	mg, err := v.Metagraph(ctx)
	if err != nil || len(mg) != 2 {
		t.Fatalf("metagraph %+v %v", mg, err)
	}
	ws, err := v.Weights(ctx, v.Hotkey())
	if err != nil || ws.Block != 3 || len(ws.Weights) != 1 {
		t.Fatalf("weights %+v %v", ws, err)
	}
	if _, err := cl.Reveals(ctx, chain.Position{}, f.Number+5, 0); Refusal(err) != CodeMalformed {
		t.Fatalf("reveals beyond finality: %v", err)
	}
}

func TestClientPagesReveals(t *testing.T) {
	ctx := context.Background()
	c, cl := serveTest(t, Options{Finality: 0})
	type pend struct {
		w          *Wallet
		d, h, salt string
	}
	var ps []pend
	for i := 0; i < 3; i++ {
		h := contentHash(string(rune('a' + i)))
		w, d, salt := commitFixture(t, c, "m"+string(rune('a'+i)), h, "https://example.com/x")
		ps = append(ps, pend{w, d, h, salt})
	}
	produce(t, c, 1)
	for _, p := range ps {
		if _, err := p.w.Reveal(ctx, p.d, p.h, "https://example.com/x", p.salt); err != nil {
			t.Fatal(err)
		}
	}
	produce(t, c, 1)
	all, err := cl.Reveals(ctx, chain.Position{}, 2, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("reveals %+v %v", all, err)
	}
	two, err := cl.Reveals(ctx, chain.Position{}, 2, 2)
	if err != nil || len(two) != 2 || two[1] != all[1] {
		t.Fatalf("limit 2: %+v %v", two, err)
	}
	rest, err := cl.Reveals(ctx, two[1].Pos, 2, 0)
	if err != nil || len(rest) != 1 || rest[0] != all[2] {
		t.Fatalf("after the second: %+v %v", rest, err)
	}
}

func TestHTTPRefusesBadRequests(t *testing.T) {
	c, cl := serveTest(t, Options{})
	k := key("m")
	x, err := Sign(Call{Kind: KindRegister, Chain: c.Genesis()}, k)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := canonMarshal(x)
	forged := x
	forged.Signature = flipHex(x.Signature)
	bad, _ := canonMarshal(forged)
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"not JSON", "POST", "/v1/extrinsics", "nope", 400, "extrinsic"},
		{"unknown field", "POST", "/v1/extrinsics", strings.Replace(good, `"signature"`, `"extra":1,"signature"`, 1), 400, "extrinsic"},
		{"not canonical", "POST", "/v1/extrinsics", " " + good, 400, "not canonical"},
		{"too large", "POST", "/v1/extrinsics", strings.Repeat("x", MaxExtrinsicBytes+1), 413, "cap"},
		{"bad signature", "POST", "/v1/extrinsics", bad, 401, "signature"},
		{"query on submit", "POST", "/v1/extrinsics?x=1", good, 400, "no query"},
		{"reveals without up_to", "GET", "/v1/reveals", "", 400, "up_to is required"},
		{"reveals unknown key", "GET", "/v1/reveals?up_to=0&foo=1", "", 400, "unknown query key"},
		{"reveals bad number", "GET", "/v1/reveals?up_to=01", "", 400, "canonical decimal"},
		{"reveals beyond finality", "GET", "/v1/reveals?up_to=9", "", 400, "beyond the finalized head"},
		{"bad hotkey", "GET", "/v1/accounts/xyz", "", 400, "hotkey"},
		{"unknown commitment", "GET", "/v1/commitments/" + contentHash("nothing"), "", 404, "not on this chain"},
		{"unknown block", "GET", "/v1/blocks/7", "", 404, "not produced yet"},
		{"bad block", "GET", "/v1/blocks/-1", "", 400, "decimal block number"},
		{"unknown endpoint", "GET", "/v2/anything", "", 404, "no such endpoint"},
		{"wrong method", "DELETE", "/v1/info", "", 404, "no such endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, cl.URL()+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
				t.Fatalf("HTTP %d %s, want %d containing %q", resp.StatusCode, b, tt.status, tt.want)
			}
		})
	}
	// The good one is accepted, once.
	if _, err := cl.Submit(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Submit(context.Background(), x); Refusal(err) != CodeNonce {
		t.Fatalf("replay over HTTP: %v", err)
	}
}

func TestNewClientRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "http://u:p@h:1", "http://h:1/?q=1", "localhost:8080"} {
		if _, err := NewClient(u, 0); err == nil {
			t.Errorf("NewClient(%q) accepted", u)
		}
	}
}
