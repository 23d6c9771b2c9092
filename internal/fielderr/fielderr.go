// Package fielderr provides the error that points at one field of a
// document an author wrote (a manifest, an arena file, a metadata file):
//
//	file:line:col: path: message: cause (hint: what to do)
//
// Each part appears only when known. Packages define their own error types
// on Problem (type ManifestError fielderr.Problem), so callers can still
// tell them apart with errors.As, and format them with Problem.Error.
package fielderr

import (
	"fmt"
	"strings"
)

// Problem is a problem with one field of a file.
type Problem struct {
	File string // the document's name; "" leaves out "file:line:col: "
	// Line and Col are 1-based, 0 when the position is not known.
	Line int
	Col  int
	Path string // offending key path such as "ops[2].source"; "" for the document as a whole
	Msg  string
	Hint string // what the author can do, "" when nothing specific
	Err  error  // underlying cause, if any, printed after Msg
}

// Error implements error: "manifest.toml:3:10: ops[0].variant: message"; or,
// without a position, "manifest.toml: ops[2].source: message"; or, without
// a file, "capabilities.head_dim: message". A cause follows the message
// after ": ", a hint ends it as " (hint: ...)".
func (p *Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", p.Line, p.Col)
		}
		b.WriteString(": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	if p.Err != nil {
		b.WriteString(": ")
		b.WriteString(p.Err.Error())
	}
	if p.Hint != "" {
		b.WriteString(" (hint: " + p.Hint + ")")
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (p *Problem) Unwrap() error { return p.Err }
