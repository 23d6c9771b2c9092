package localchain

import (
	"errors"
	"net/http"
)

// Refusal codes: why the chain refused a request. The HTTP API carries
// the code next to the message, so a client sees the same *RefusedError
// the chain returned.
const (
	CodeMalformed = "malformed" // not a well-formed request or extrinsic
	CodeSignature = "signature" // the signature does not verify
	CodeNonce     = "nonce"     // wrong nonce: a replay or out of order
	CodeState     = "state"     // the chain's state does not allow it
	CodeNotFinal  = "not_final" // the commitment is not finalized yet
	CodeMismatch  = "mismatch"  // the reveal does not match its commitment
	CodeNotFound  = "not_found" // no such object
	CodeBusy      = "busy"      // too many pending extrinsics
)

// Errors of Open a caller may tell apart.
var (
	// ErrFinalityChanged: the chain was created with another finality
	// depth (it is fixed for the chain's life).
	ErrFinalityChanged = errors.New("finality depth changed")
	// ErrLocked: another node has the data directory open.
	ErrLocked = errors.New("data directory locked")
)

// RefusedError is a request the chain refused: the caller's fault, never
// the node's.
type RefusedError struct {
	Code string
	Err  error
}

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

func refuse(code string, err error) error { return &RefusedError{Code: code, Err: err} }

// Refusal returns the refusal code of err ("" when err is no refusal).
func Refusal(err error) string {
	var r *RefusedError
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

func codeOf(err error) string {
	if errors.Is(err, ErrBadSignature) {
		return CodeSignature
	}
	return CodeMalformed
}

// httpStatus maps a refusal code to its HTTP status.
func httpStatus(code string) int {
	switch code {
	case CodeMalformed:
		return http.StatusBadRequest
	case CodeSignature:
		return http.StatusUnauthorized
	case CodeNonce, CodeState:
		return http.StatusConflict
	case CodeNotFinal, CodeMismatch:
		return http.StatusUnprocessableEntity
	case CodeNotFound:
		return http.StatusNotFound
	case CodeBusy:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}
