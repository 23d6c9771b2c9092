package devnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeDevnet is a hand-written stand-in for a running devnet's three
// servers on one address: the archive host's identity, the validator's
// /api/overview and the chain's /v1/info.
func fakeDevnet(t *testing.T, token string, validatorUp bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+identityPath, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, token) })
	mux.HandleFunc("GET /api/overview", func(w http.ResponseWriter, _ *http.Request) {
		if !validatorUp {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"head":3}`))
	})
	mux.HandleFunc("GET /v1/info", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"genesis":"g","finality":2}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// closedURL is an http:// address nothing listens on (a listener opened
// and closed at once).
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestAttach(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	live := fakeDevnet(t, token, true)
	other := fakeDevnet(t, "fedcba9876543210fedcba9876543210", true)
	noValidator := fakeDevnet(t, token, false)
	dead := closedURL(t)
	info := func(dir, url string) *Info {
		host := strings.TrimPrefix(url, "http://")
		return &Info{Dir: dir, Arena: "cpu-tiny", Chain: url, Archives: url, WWW: filepath.Join(dir, "www"), Validator: host,
			Instance: token, PID: 42, Started: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
	}
	for _, tc := range []struct {
		name string
		// file is what DIR/devnet.json holds ("" = no file); DIR is
		// substituted for the directory.
		file       func(dir string) string
		notRunning bool   // the error wraps ErrNotRunning
		notExist   bool   // and fs.ErrNotExist
		want       string // a substring of the error ("" = no error)
	}{
		{"no file", func(string) string { return "" }, true, true, "no devnet is running"},
		{"live", func(dir string) string { return jsonOf(t, info(dir, live.URL)) }, false, false, ""},
		{"killed: nothing listens", func(dir string) string { return jsonOf(t, info(dir, dead)) }, true, false, "is stale (archive host"},
		{"the port serves another instance", func(dir string) string { return jsonOf(t, info(dir, other.URL)) }, true, false, "another devnet instance"},
		{"the validator does not answer", func(dir string) string { return jsonOf(t, info(dir, noValidator.URL)) }, true, false, "is stale (validator"},
		{"moved directory", func(string) string { return jsonOf(t, info("/elsewhere", live.URL)) }, true, false, `field "dir" is /elsewhere`},
		{"not JSON", func(string) string { return "{" }, false, false, InfoFile + ": unexpected EOF"},
		{"two objects", func(dir string) string { return jsonOf(t, info(dir, live.URL)) + "{}" }, false, false, "data after the object"},
		{"unknown field", func(dir string) string { return `{"dir":"` + dir + `","port":1}` }, false, false, `unknown field "port"`},
		{"missing field", func(dir string) string {
			i := info(dir, live.URL)
			i.Instance = ""
			return jsonOf(t, i)
		}, false, false, `field "instance" is missing`},
		{"archives not http", func(dir string) string {
			i := info(dir, live.URL)
			i.Archives = "file:///etc"
			return jsonOf(t, i)
		}, false, false, `field "archives"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if f := tc.file(dir); f != "" {
				if err := os.WriteFile(filepath.Join(dir, InfoFile), []byte(f), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Attach(context.Background(), dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if *got != *info(dir, live.URL) {
					t.Errorf("got %+v", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one saying %q", err, tc.want)
			}
			if errors.Is(err, ErrNotRunning) != tc.notRunning || errors.Is(err, fs.ErrNotExist) != tc.notExist {
				t.Errorf("error %v: ErrNotRunning %v, fs.ErrNotExist %v; want %v, %v", err,
					errors.Is(err, ErrNotRunning), errors.Is(err, fs.ErrNotExist), tc.notRunning, tc.notExist)
			}
		})
	}
}

// TestInfoFile: writeInfo replaces the file whole; removeInfo removes only
// the file of its own instance.
func TestInfoFile(t *testing.T) {
	dir := t.TempDir()
	a := &Info{Dir: dir, Arena: "cpu-tiny", Chain: "http://127.0.0.1:1", Archives: "http://127.0.0.1:2", WWW: dir, Validator: "127.0.0.1:3", Instance: "a"}
	b := *a
	b.Instance = "b"
	for _, i := range []*Info{a, &b} {
		if err := writeInfo(i); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readInfo(filepath.Join(dir, InfoFile))
	if err != nil || got.Instance != "b" {
		t.Fatalf("read back %+v, %v; want instance b", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries; want only %s (no temporary file left)", len(entries), InfoFile)
	}
	removeInfo(dir, "a")
	if _, err := os.Stat(filepath.Join(dir, InfoFile)); err != nil {
		t.Errorf("instance a removed instance b's file: %v", err)
	}
	removeInfo(dir, "b")
	if _, err := os.Stat(filepath.Join(dir, InfoFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("instance b's own file: %v; want it removed", err)
	}
}

// TestCheckDemo: a directory where the demo ran, or began, refuses it.
func TestCheckDemo(t *testing.T) {
	for _, tc := range []struct {
		name, make, want string
	}{
		{"fresh", "", ""},
		{"ran", DemoFile, "its summary is"},
		{"interrupted", "miners/alice.state", "did not finish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.make != "" {
				p := filepath.Join(dir, filepath.FromSlash(tc.make))
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := CheckDemo(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrDemoRan) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v; want ErrDemoRan saying %q", err, tc.want)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWalletAt: a bad key or chain URL is an error, never a panic.
func TestWalletAt(t *testing.T) {
	good := make([]byte, 64)
	for _, tc := range []struct {
		name, url string
		key       []byte
		want      string
	}{
		{"short key", "http://127.0.0.1:1", make([]byte, 10), "not an ed25519 private key"},
		{"no key", "http://127.0.0.1:1", nil, "not an ed25519 private key"},
		{"not a URL", "127.0.0.1:1", good, "chain URL"},
		{"a file URL", "file:///etc", good, "chain URL"},
		{"good", "http://127.0.0.1:1", good, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := walletAt(tc.url, tc.key)
			if tc.want == "" {
				if err != nil || w == nil {
					t.Fatalf("%v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v; want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestDevKey: a missing key is generated once and read back the same; a
// file that is not a key is an error.
func TestDevKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys", "k.key")
	a, err := devKey(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := devKey(path)
	if err != nil || !a.Equal(b) {
		t.Fatalf("read back %v: a different key", err)
	}
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := devKey(bad); err == nil {
		t.Error("a file that is not a key was read as one")
	}
}

// FuzzReadInfo: any bytes in devnet.json are an error or an Info with
// every required field, never a panic.
func FuzzReadInfo(f *testing.F) {
	f.Add([]byte(`{"dir":"/d","arena":"cpu-tiny","chain":"http://127.0.0.1:1","archives":"http://127.0.0.1:2","www":"/d/www","validator":"127.0.0.1:3","instance":"x","pid":1,"started":"2026-12-01T20:00:00Z"}`))
	f.Add([]byte(`{"dir":1}`))
	f.Add([]byte(`{}{}`))
	f.Add([]byte{0xff, 0})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, InfoFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		info, err := readInfo(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("the error does not name the file: %v", err)
			}
			return
		}
		if info.Dir == "" || info.Instance == "" || info.Validator == "" || !strings.HasPrefix(info.Archives, "http://") {
			t.Errorf("accepted %q as %+v", data, info)
		}
	})
}
