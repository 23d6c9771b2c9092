// Package fetch downloads a revealed bundle archive from the URL a miner
// committed on chain and extracts it, within hard bounds, into a directory
// the intake owns.
//
// The URL is hostile input. Archives are fetched over https; plain http
// only to loopback and only with Config.AllowLoopbackHTTP (the devnet
// flag). Every connection goes through a dialer whose Control function
// judges the address actually dialed, after name resolution (policy.go), so
// neither a name resolving to an internal address nor DNS rebinding between
// checks reaches one: loopback (unless the flag), private, link-local,
// multicast, unspecified, CGNAT, documentation and other special-purpose
// ranges, IPv4-mapped and 6to4 forms of them, and anything outside IPv6
// global unicast are refused. No proxy from the environment is used.
// Redirects are capped and each target is checked again. The whole fetch
// has one deadline; the response must be 200 with a body no larger than
// the archive bound, and the body streams straight into bundle.Extract,
// whose limits and committed content hash apply.
//
// Failures are *Error: Reason() is a stable code and Transient() says
// whether a later attempt may succeed (timeouts, transport errors, 5xx and
// 429) or the submission is at fault (address, status, size, archive,
// hash).
package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"cacheon/internal/bundle"
)

// Defaults of Config's zero fields.
const (
	DefaultTimeout      = 2 * time.Minute
	DefaultMaxRedirects = 3
	maxURLBytes         = 2048
)

// Config configures a Fetcher. The zero value fetches over https from
// public addresses with the default bounds.
type Config struct {
	// AllowLoopbackHTTP (the devnet flag) allows loopback addresses, and
	// plain http:// to loopback only.
	AllowLoopbackHTTP bool
	// Limits bound the archive and its extraction (zero fields: the
	// defaults of bundle.DefaultExtractLimits). MaxCompressedBytes also
	// bounds the body read from the network.
	Limits bundle.ExtractLimits
	// Timeout bounds one whole Fetch: connecting, redirects, the download
	// and the extraction (0 = DefaultTimeout).
	Timeout time.Duration
	// MaxRedirects caps the redirects followed (0 = DefaultMaxRedirects;
	// negative = none followed).
	MaxRedirects int
	// RootCAs verifies servers (nil = the system roots); tests pass the
	// test server's.
	RootCAs *x509.CertPool
}

// Fetcher fetches bundle archives. It is safe for concurrent use; it keeps
// no connections between fetches.
type Fetcher struct {
	cfg    Config
	client *http.Client
}

// New returns a Fetcher for cfg.
func New(cfg Config) *Fetcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = DefaultMaxRedirects
	}
	f := &Fetcher{cfg: cfg}
	tr := &http.Transport{
		Proxy:                  nil, // never a proxy from the environment
		DialContext:            f.dialer(true).DialContext,
		DialTLSContext:         f.dialTLS,
		DisableKeepAlives:      true,
		DisableCompression:     true, // the archive's own gzip is Extract's to read, bounded
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	f.client = &http.Client{Transport: tr, CheckRedirect: f.checkRedirect}
	return f
}

// dialer returns the dialer for plain (http://) or TLS connections, with
// the address policy in its Control function.
func (f *Fetcher) dialer(plain bool) *net.Dialer {
	return &net.Dialer{Timeout: 15 * time.Second, Control: control(f.cfg.AllowLoopbackHTTP, plain)}
}

// dialTLS dials through the policy-checked dialer and completes the TLS
// handshake (HTTP/1.1 only).
func (f *Fetcher) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	conn, err := f.dialer(false).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(conn, &tls.Config{ServerName: host, RootCAs: f.cfg.RootCAs, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// checkURL accepts an absolute https:// URL (http:// with the devnet flag)
// with a host, no credentials and no fragment. A host that is an IP
// literal is judged here already; names are judged when dialed.
func (f *Fetcher) checkURL(u *url.URL) *Error {
	plain := false
	switch u.Scheme {
	case "https":
	case "http":
		if !f.cfg.AllowLoopbackHTTP {
			return permanent(ReasonSchemeNotAllowed, "plain http:// is refused; serve the archive over https", nil)
		}
		plain = true
	default:
		return permanent(ReasonSchemeNotAllowed, fmt.Sprintf("scheme %q is refused; serve the archive over https", clip(u.Scheme)), nil)
	}
	switch {
	case u.Opaque != "" || u.Host == "":
		return permanent(ReasonBadRequest, "the URL has no host", nil)
	case u.User != nil:
		return permanent(ReasonBadRequest, "the URL carries credentials", nil)
	case u.Fragment != "":
		return permanent(ReasonBadRequest, "the URL has a fragment", nil)
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := allowed(ip, f.cfg.AllowLoopbackHTTP, plain); err != nil {
			return permanent(ReasonAddressNotPublic, "", err)
		}
	}
	return nil
}

// checkRedirect caps redirects and checks every target as the first URL.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.cfg.MaxRedirects {
		return permanent(ReasonRedirect, fmt.Sprintf("more than %d redirects", max(f.cfg.MaxRedirects, 0)), nil)
	}
	if err := f.checkURL(req.URL); err != nil {
		return permanent(ReasonRedirect, "redirect to "+clip(req.URL.Redacted()), err)
	}
	return nil
}

// Fetch downloads the archive at rawURL and extracts it into destDir (new,
// or an empty directory) with bundle.Extract, whose content hash must equal
// contentHash, the one revealed on chain. On error nothing extracted is
// left in destDir, and the error is an *Error.
func (f *Fetcher) Fetch(ctx context.Context, rawURL, contentHash, destDir string) error {
	if err := bundle.CheckContentHash(contentHash); err != nil {
		return permanent(ReasonBadRequest, "committed content hash", err)
	}
	if len(rawURL) > maxURLBytes {
		return permanent(ReasonBadRequest, fmt.Sprintf("the URL is longer than %d bytes", maxURLBytes), nil)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return permanent(ReasonBadRequest, "parse the URL", err)
	}
	if err := f.checkURL(u); err != nil {
		return err
	}
	lim, err := f.limits()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeoutCause(ctx, f.cfg.Timeout, errDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return permanent(ReasonBadRequest, "build the request", err)
	}
	req.Header.Set("User-Agent", "cacheon-fetch/1")
	resp, err := f.client.Do(req)
	if err != nil {
		return classify(ctx, "request", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg := fmt.Sprintf("the server answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return transient(ReasonHTTPStatus, msg, nil)
		}
		return permanent(ReasonHTTPStatus, msg, nil)
	}
	if resp.ContentLength > lim.MaxCompressedBytes {
		return permanent(ReasonTooLarge, fmt.Sprintf("Content-Length %d exceeds %d bytes", resp.ContentLength, lim.MaxCompressedBytes), nil)
	}
	body := &countingReader{r: resp.Body, limit: lim.MaxCompressedBytes}
	if _, err := bundle.Extract(ctx, body, destDir, lim, contentHash); err != nil {
		return classifyExtract(ctx, body, err)
	}
	return nil
}

// limits resolves Config.Limits' zero fields to the defaults.
func (f *Fetcher) limits() (bundle.ExtractLimits, error) {
	l, d := f.cfg.Limits, bundle.DefaultExtractLimits()
	if l.MaxCompressedBytes < 0 || l.MaxExtractedBytes < 0 || l.MaxMembers < 0 || l.MaxFileBytes < 0 || l.MaxNameBytes < 0 {
		return l, permanent(ReasonBadRequest, fmt.Sprintf("negative limit in the fetcher's configuration %+v", l), nil)
	}
	if l.MaxCompressedBytes == 0 {
		l.MaxCompressedBytes = d.MaxCompressedBytes
	}
	return l, nil
}

// errDeadline is the cause of the fetch's own deadline.
var errDeadline = errors.New("the fetch deadline passed")

// classify turns a failed request (connect, TLS, redirects, headers) into
// an *Error: the deadline and cancellation first, then the policy's own
// refusals, then transport errors (transient).
func classify(ctx context.Context, step string, err error) *Error {
	if e := ctxError(ctx, step, err); e != nil {
		return e
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe
	}
	if isTimeout(err) {
		return transient(ReasonTimeout, step, err)
	}
	return transient(ReasonTransport, step, err)
}

// ctxError reports the fetch's deadline (timeout) or the caller's
// cancellation, both transient; nil while ctx is live.
func ctxError(ctx context.Context, step string, err error) *Error {
	if ctx.Err() == nil {
		return nil
	}
	if errors.Is(context.Cause(ctx), errDeadline) {
		return transient(ReasonTimeout, step+": "+errDeadline.Error(), err)
	}
	return transient(ReasonCanceled, step, context.Cause(ctx))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

// classifyExtract maps an Extract failure: the deadline, a broken body
// (transport, transient) and the body's bound first, then the archive's
// own faults (permanent); a local failure is transient.
func classifyExtract(ctx context.Context, body *countingReader, err error) *Error {
	if e := ctxError(ctx, "download and extract", err); e != nil {
		return e
	}
	if body.over {
		return permanent(ReasonTooLarge, fmt.Sprintf("the body exceeds %d bytes", body.limit), nil)
	}
	if body.err != nil {
		if isTimeout(body.err) {
			return transient(ReasonTimeout, "read the body", body.err)
		}
		return transient(ReasonTransport, "read the body", body.err)
	}
	var xe *bundle.ExtractError
	if !errors.As(err, &xe) {
		return transient(ReasonLocalIO, "extract", err)
	}
	switch xe.Kind {
	case bundle.ExtractHashMismatch:
		return permanent(ReasonHashMismatch, "", err)
	case bundle.ExtractLimit:
		return permanent(ReasonTooLarge, "", err)
	case bundle.ExtractUnsafe, bundle.ExtractMalformed:
		return permanent(ReasonBadArchive, "", err)
	}
	return transient(ReasonLocalIO, "", err)
}

// countingReader reads the response body, remembering a transport error
// (so it is not mistaken for a bad archive) and refusing more than limit
// bytes.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
	err   error // the first read error other than io.EOF
}

// errTooLarge stops extraction when the body runs past its bound.
var errTooLarge = errors.New("the body exceeds the archive bound")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, errTooLarge
	}
	if room := c.limit + 1 - c.n; int64(len(p)) > room {
		p = p[:room]
	}
	m, err := c.r.Read(p)
	c.n += int64(m)
	if c.n > c.limit {
		c.over = true
		return 0, errTooLarge
	}
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return m, err
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:197] + "..."
	}
	return s
}
