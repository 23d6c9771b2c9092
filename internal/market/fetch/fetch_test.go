package fetch

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/compattest"
)

// packed is an archive made with the repository's own packer.
type packed struct {
	data []byte
	hash string
}

func pack(t *testing.T, dir string) packed {
	t.Helper()
	var buf bytes.Buffer
	h, err := bundle.Package(dir, &buf)
	if err != nil {
		t.Fatal(err)
	}
	return packed{buf.Bytes(), h}
}

// silu packs the compatibility corpus's miner_silu_torch.
func silu(t *testing.T) packed {
	t.Helper()
	return pack(t, filepath.Join(compattest.Dir(t), "upstream-examples", "miner_silu_torch"))
}

func serveBytes(data []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/gzip")
		w.Write(data)
	}
}

// wantErr checks that err is an *Error with reason and transience.
func wantErr(t *testing.T, err error, reason string, isTransient bool) {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T), want *fetch.Error %s", err, err, reason)
	}
	if fe.Reason() != reason || fe.Transient() != isTransient {
		t.Fatalf("error %v: reason %s transient %v, want %s transient %v", err, fe.Reason(), fe.Transient(), reason, isTransient)
	}
}

func devnet() *Fetcher { return New(Config{AllowLoopbackHTTP: true}) }

// wantEmpty checks that nothing extracted was left behind.
func wantEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%s holds %d entries after a failed fetch, want none", dir, len(entries))
	}
}

// TestFetchCompatArchives serves the archives the established tool packed
// (one top folder) and fetches them with their committed hash.
func TestFetchCompatArchives(t *testing.T) {
	for _, a := range compattest.Archives(t) {
		t.Run(a.Name, func(t *testing.T) {
			data, err := os.ReadFile(a.Path)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(serveBytes(data))
			defer srv.Close()
			dest := filepath.Join(t.TempDir(), "b")
			if err := devnet().Fetch(t.Context(), srv.URL+"/"+a.Name+".tar.gz", a.Hash, dest); err != nil {
				t.Fatal(err)
			}
			got, err := bundle.ContentHash(dest)
			if err != nil || got != a.Hash {
				t.Fatalf("extracted hash %s, %v; want %s", got, err, a.Hash)
			}
		})
	}
}

// TestFetchOwnPackage fetches an archive made by bundle.Package over plain
// http (devnet) and over TLS (the test server's certificate).
func TestFetchOwnPackage(t *testing.T) {
	p := silu(t)
	t.Run("http", func(t *testing.T) {
		srv := httptest.NewServer(serveBytes(p.data))
		defer srv.Close()
		dest := filepath.Join(t.TempDir(), "b")
		if err := devnet().Fetch(t.Context(), srv.URL+"/a.tar.gz", p.hash, dest); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dest, bundle.ManifestName)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("http to a name resolving to loopback", func(t *testing.T) {
		srv := httptest.NewServer(serveBytes(p.data))
		defer srv.Close()
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		if err := devnet().Fetch(t.Context(), "http://localhost:"+port+"/a.tar.gz", p.hash, filepath.Join(t.TempDir(), "b")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("https", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(serveBytes(p.data))
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
		srv.StartTLS()
		defer srv.Close()
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		f := New(Config{AllowLoopbackHTTP: true, RootCAs: pool})
		if err := f.Fetch(t.Context(), srv.URL+"/a.tar.gz", p.hash, filepath.Join(t.TempDir(), "b")); err != nil {
			t.Fatal(err)
		}
		// Without the test root the certificate does not verify: a
		// transport problem, not the archive's.
		err := New(Config{AllowLoopbackHTTP: true}).Fetch(t.Context(), srv.URL+"/a.tar.gz", p.hash, filepath.Join(t.TempDir(), "c"))
		wantErr(t, err, ReasonTransport, true)
	})
}

func TestFetchContentErrors(t *testing.T) {
	p := silu(t)
	other := pack(t, filepath.Join(compattest.Dir(t), "upstream-examples", "miner_rmsnorm_triton"))
	for _, tc := range []struct {
		name      string
		handler   http.HandlerFunc
		hash      string
		limits    bundle.ExtractLimits
		reason    string
		transient bool
	}{
		{"hash mismatch", serveBytes(other.data), p.hash, bundle.ExtractLimits{}, ReasonHashMismatch, false},
		{"not gzip", serveBytes([]byte("<html>not an archive</html>")), p.hash, bundle.ExtractLimits{}, ReasonBadArchive, false},
		{"truncated gzip", serveBytes(p.data[:len(p.data)/2]), p.hash, bundle.ExtractLimits{}, ReasonBadArchive, false},
		{"content-length too large", serveBytes(p.data), p.hash, bundle.ExtractLimits{MaxCompressedBytes: 64}, ReasonTooLarge, false},
		{"chunked body too large", func(w http.ResponseWriter, r *http.Request) {
			w.Write(p.data[:10])
			w.(http.Flusher).Flush() // no Content-Length: chunked
			w.Write(p.data[10:])
		}, p.hash, bundle.ExtractLimits{MaxCompressedBytes: 64}, ReasonTooLarge, false},
		{"extracted too large", serveBytes(p.data), p.hash, bundle.ExtractLimits{MaxFileBytes: 16}, ReasonTooLarge, false},
		{"404", http.NotFound, p.hash, bundle.ExtractLimits{}, ReasonHTTPStatus, false},
		{"403", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }, p.hash, bundle.ExtractLimits{}, ReasonHTTPStatus, false},
		{"206", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusPartialContent) }, p.hash, bundle.ExtractLimits{}, ReasonHTTPStatus, false},
		{"503", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }, p.hash, bundle.ExtractLimits{}, ReasonHTTPStatus, true},
		{"429", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTooManyRequests) }, p.hash, bundle.ExtractLimits{}, ReasonHTTPStatus, true},
		{"body cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(p.data)))
			w.Write(p.data[:len(p.data)/2])
			// the handler returns early: the server closes the connection
		}, p.hash, bundle.ExtractLimits{}, ReasonTransport, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			dest := filepath.Join(t.TempDir(), "b")
			err := New(Config{AllowLoopbackHTTP: true, Limits: tc.limits}).Fetch(t.Context(), srv.URL+"/a.tar.gz", tc.hash, dest)
			wantErr(t, err, tc.reason, tc.transient)
			wantEmpty(t, dest)
		})
	}
}

// TestFetchRefusedURLs checks URLs refused before any connection and, with
// the devnet flag off, loopback servers refused by scheme or at dial time.
func TestFetchRefusedURLs(t *testing.T) {
	p := silu(t)
	srv := httptest.NewServer(serveBytes(p.data))
	defer srv.Close()
	tls := httptest.NewTLSServer(serveBytes(p.data))
	defer tls.Close()
	pool := x509.NewCertPool()
	pool.AddCert(tls.Certificate())
	_, port, _ := net.SplitHostPort(tls.Listener.Addr().String())
	public := New(Config{RootCAs: pool})
	for _, tc := range []struct {
		name   string
		f      *Fetcher
		url    string
		hash   string
		reason string
	}{
		{"bad hash", devnet(), srv.URL, "abc", ReasonBadRequest},
		{"credentials", devnet(), "https://user:pw@example.com/a.tar.gz", p.hash, ReasonBadRequest},
		{"fragment", devnet(), "https://example.com/a.tar.gz#x", p.hash, ReasonBadRequest},
		{"no host", devnet(), "https:///a.tar.gz", p.hash, ReasonBadRequest},
		{"opaque", devnet(), "https:example.com", p.hash, ReasonBadRequest},
		{"ftp", devnet(), "ftp://example.com/a.tar.gz", p.hash, ReasonSchemeNotAllowed},
		{"file", devnet(), "file:///etc/passwd", p.hash, ReasonSchemeNotAllowed},
		{"http without the flag", public, srv.URL + "/a.tar.gz", p.hash, ReasonSchemeNotAllowed},
		{"http to a private literal with the flag", devnet(), "http://10.0.0.1/a.tar.gz", p.hash, ReasonAddressNotPublic},
		{"https to a metadata address", devnet(), "https://169.254.169.254/latest", p.hash, ReasonAddressNotPublic},
		{"https to a mapped private address", devnet(), "https://[::ffff:192.168.0.1]/a", p.hash, ReasonAddressNotPublic},
		{"https loopback literal without the flag", public, tls.URL + "/a.tar.gz", p.hash, ReasonAddressNotPublic},
		{"https localhost without the flag (refused at dial)", public, "https://localhost:" + port + "/a.tar.gz", p.hash, ReasonAddressNotPublic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Fetch(t.Context(), tc.url, tc.hash, filepath.Join(t.TempDir(), "b"))
			wantErr(t, err, tc.reason, false)
		})
	}
}

func TestFetchRedirects(t *testing.T) {
	p := silu(t)
	srv := httptest.NewServer(serveBytes(p.data))
	defer srv.Close()
	redirect := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
	}
	hop := httptest.NewServer(redirect(srv.URL + "/a.tar.gz"))
	defer hop.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/loop", redirect("/loop"))
	mux.HandleFunc("/private", redirect("http://10.0.0.1/a.tar.gz"))
	mux.HandleFunc("/metadata", redirect("https://169.254.169.254/latest"))
	mux.HandleFunc("/ftp", redirect("ftp://example.com/a.tar.gz"))
	mux.HandleFunc("/creds", redirect("https://u:p@example.com/a.tar.gz"))
	bad := httptest.NewServer(mux)
	defer bad.Close()

	t.Run("allowed hop", func(t *testing.T) {
		if err := devnet().Fetch(t.Context(), hop.URL+"/x", p.hash, filepath.Join(t.TempDir(), "b")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no redirects allowed", func(t *testing.T) {
		f := New(Config{AllowLoopbackHTTP: true, MaxRedirects: -1})
		wantErr(t, f.Fetch(t.Context(), hop.URL+"/x", p.hash, filepath.Join(t.TempDir(), "b")), ReasonRedirect, false)
	})
	for _, path := range []string{"/loop", "/private", "/metadata", "/ftp", "/creds"} {
		t.Run(path, func(t *testing.T) {
			wantErr(t, devnet().Fetch(t.Context(), bad.URL+path, p.hash, filepath.Join(t.TempDir(), "b")), ReasonRedirect, false)
		})
	}
}

// TestFetchDeadline bounds slow servers by the fetch's overall deadline:
// one that never answers, and a slow loris that sends headers and then a
// byte at a time forever. Only the outcome is asserted, never a duration.
func TestFetchDeadline(t *testing.T) {
	p := silu(t)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"no headers", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{"slow loris", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(p.data)))
			for i := 0; i < len(p.data); i++ {
				w.Write(p.data[i : i+1])
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			f := New(Config{AllowLoopbackHTTP: true, Timeout: 300 * time.Millisecond})
			dest := filepath.Join(t.TempDir(), "b")
			wantErr(t, f.Fetch(t.Context(), srv.URL+"/a.tar.gz", p.hash, dest), ReasonTimeout, true)
			wantEmpty(t, dest)
		})
	}
}

func TestFetchTransport(t *testing.T) {
	p := silu(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	wantErr(t, devnet().Fetch(t.Context(), "http://"+addr+"/a.tar.gz", p.hash, filepath.Join(t.TempDir(), "b")), ReasonTransport, true)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	srv := httptest.NewServer(serveBytes(p.data))
	defer srv.Close()
	wantErr(t, devnet().Fetch(ctx, srv.URL, p.hash, filepath.Join(t.TempDir(), "c")), ReasonCanceled, true)

	// A destination that is not empty is this validator's problem.
	dest := t.TempDir()
	if err := os.WriteFile(filepath.Join(dest, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wantErr(t, devnet().Fetch(t.Context(), srv.URL, p.hash, dest), ReasonLocalIO, true)
}

func TestErrorText(t *testing.T) {
	e := permanent(ReasonHashMismatch, "x", errors.New("y"))
	if got, want := e.Error(), "fetch: hash_mismatch: x: y"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
