package fetch

import "strings"

// Reason codes of a failed fetch. They are stable: the intake records them.
const (
	// Permanent: the URL, the address or the content is at fault; fetching
	// again cannot help.
	ReasonBadRequest       = "bad_request"        // the URL or the committed hash is malformed
	ReasonSchemeNotAllowed = "scheme_not_allowed" // not https (plain http outside the devnet flag)
	ReasonAddressNotPublic = "address_not_public" // the host resolves to a refused address
	ReasonRedirect         = "redirect"           // too many redirects, or to a refused target
	ReasonHTTPStatus       = "http_status"        // 4xx or another non-200 answer (transient for 5xx and 429)
	ReasonTooLarge         = "too_large"          // Content-Length or the bytes read exceed the bound
	ReasonBadArchive       = "bad_archive"        // not a well-formed, safe bundle archive
	ReasonHashMismatch     = "hash_mismatch"      // the archive is not the committed bundle

	// Transient: the transport or this validator failed; a later attempt may
	// succeed.
	ReasonTimeout   = "timeout"   // the overall deadline passed
	ReasonTransport = "transport" // connection refused or reset, DNS, TLS, a broken body
	ReasonCanceled  = "canceled"  // the caller's context ended
	ReasonLocalIO   = "local_io"  // the destination directory could not be written
)

// Error is a failed fetch. Reason is a stable code (the Reason* constants);
// Transient says whether a later attempt may succeed (transport problems,
// timeouts, 5xx and 429) or the failure is the submission's and permanent
// (address, status, size, archive, hash).
type Error struct {
	reason    string
	transient bool
	msg       string
	err       error
}

// Reason returns the stable reason code.
func (e *Error) Reason() string { return e.reason }

// Transient reports whether fetching again later may succeed.
func (e *Error) Transient() bool { return e.transient }

// Error implements error: "fetch: reason: message: cause".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("fetch: ")
	b.WriteString(e.reason)
	if e.msg != "" {
		b.WriteString(": ")
		b.WriteString(e.msg)
	}
	if e.err != nil {
		b.WriteString(": ")
		b.WriteString(e.err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.err }

func permanent(reason, msg string, err error) *Error {
	return &Error{reason: reason, msg: msg, err: err}
}

func transient(reason, msg string, err error) *Error {
	return &Error{reason: reason, transient: true, msg: msg, err: err}
}
