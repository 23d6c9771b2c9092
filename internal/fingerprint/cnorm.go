package fingerprint

import (
	"bytes"
	"strings"
)

// normalizeC returns a CUDA/C++ source without its comments and without
// the layout between tokens, so that a copy with changed comments or
// reformatted code has the same form:
//
//   - // and /* */ comments become a gap; a backslash-newline splice is a
//     gap too;
//   - string and character literals are copied verbatim, escapes
//     included (a comment marker inside one is text);
//   - a gap (whitespace, comments) is dropped, except where dropping it
//     would join two tokens into another: between two word characters
//     [A-Za-z0-9_] (int x) and between two punctuation characters that
//     start a two-character punctuator or comment (a - -b, a / /b); there
//     it is one space;
//   - an unterminated comment or literal runs to the end of the file.
//
// It is a lexer, not a parser: raw string literals and the line structure
// of preprocessor directives are not treated specially (a newline is a gap
// like any other), which keeps the form deterministic at the cost of
// conflating a few layouts no compiler would accept alike.
func normalizeC(src []byte) string {
	var b strings.Builder
	b.Grow(len(src))
	gap := false
	var last byte // last byte written, 0 at the start
	emit := func(c byte) {
		if gap && last != 0 && joins(last, c) {
			b.WriteByte(' ')
		}
		gap = false
		b.WriteByte(c)
		last = c
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			gap = true
			i++
		case c == '\\' && i+1 < len(src) && (src[i+1] == '\n' || src[i+1] == '\r'):
			gap = true
			i += 2
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			gap = true
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				i = len(src)
			} else {
				i += 2 + end + 2
			}
			gap = true
		case c == '"' || c == '\'':
			emit(c)
			i++
			for i < len(src) {
				d := src[i]
				b.WriteByte(d)
				i++
				if d == '\\' && i < len(src) {
					b.WriteByte(src[i])
					i++
					continue
				}
				if d == c || d == '\n' {
					break
				}
			}
			last = c
		default:
			emit(c)
			i++
		}
	}
	return b.String()
}

// joins reports whether a and c, written next to each other, could read
// as one token.
func joins(a, c byte) bool {
	if isWord(a) || isWord(c) {
		return isWord(a) && isWord(c)
	}
	return strings.Contains(punctPairs, string([]byte{a, c}))
}

// punctPairs are the two-character C/C++ punctuators and comment starts,
// space-separated.
const punctPairs = "++ -- -> << >> <= >= == != && || += -= *= /= %= &= |= ^= :: .. ## // /*"

func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
