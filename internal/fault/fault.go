// Package fault attributes an error to the party whose fault it is: the
// person giving the command (bad usage or unreadable input), the candidate
// (its bundle or its code failed), or the infrastructure (nothing could be
// established). The CLI turns a party into an exit code and the referee into
// a verdict (a candidate FAIL versus NO_DECISION); the domain packages that
// find an error say whose it is, once, where they know.
package fault

import "errors"

// Party is who an error is attributed to.
type Party int

// The parties. An error nobody attributed is the user's (Usage).
const (
	Usage Party = iota
	Candidate
	Infra
)

func (p Party) String() string {
	switch p {
	case Candidate:
		return "candidate"
	case Infra:
		return "infrastructure"
	}
	return "usage"
}

// Error is an error attributed to a party.
type Error struct {
	Party Party
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Of returns the party of the outermost attributed error in err's chain,
// Usage when there is none. The outermost wins, so a caller that knows
// better can re-attribute what a callee said.
func Of(err error) Party {
	var e *Error
	if errors.As(err, &e) {
		return e.Party
	}
	return Usage
}

// CandidateErr attributes err to the candidate (nil stays nil).
func CandidateErr(err error) error { return attribute(Candidate, err) }

// InfraErr attributes err to the infrastructure (nil stays nil).
func InfraErr(err error) error { return attribute(Infra, err) }

// UsageErr attributes err to the user explicitly (nil stays nil), e.g. to
// override an attribution further down the chain.
func UsageErr(err error) error { return attribute(Usage, err) }

func attribute(p Party, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Party: p, Err: err}
}
