package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// Bounds on astnorm's output, which is untrusted input.
const (
	maxNormBytes  = 16 << 20 // one file's normalized dump
	maxErrorBytes = 1 << 10  // one file's error message
)

// normLine is one line of astnorm's output: a file's normalized dump, or
// why it has none.
type normLine struct {
	Path  string
	Norm  *string
	Error *string
}

// normResult is what astnorm says about one file: its dump, or err (the
// file does not parse, or is too deep to normalize).
type normResult struct {
	norm string
	err  string
}

// decodeOutput strictly decodes astnorm's stdout for the files paths, in
// order: exactly one JSON object per line and per file, each with the
// file's path and exactly one of "norm" (non-empty, at most maxNormBytes)
// and "error" (non-empty, at most maxErrorBytes), no other keys, nothing after the
// last line.
func decodeOutput(out []byte, paths []string) ([]normResult, error) {
	results := make([]normResult, 0, len(paths))
	rest := out
	for i, want := range paths {
		line, tail, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("decode normalizer output: line %d of %d is missing or unterminated", i+1, len(paths))
		}
		rest = tail
		l, err := decodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("decode normalizer output: line %d: %w", i+1, err)
		}
		if l.Path != want {
			return nil, fmt.Errorf("decode normalizer output: line %d is for %q, want %q", i+1, clip(l.Path), want)
		}
		switch {
		case (l.Norm == nil) == (l.Error == nil):
			return nil, fmt.Errorf("decode normalizer output: %s: want exactly one of norm and error", want)
		case l.Error != nil:
			if *l.Error == "" {
				return nil, fmt.Errorf("decode normalizer output: %s: empty error", want)
			}
			if len(*l.Error) > maxErrorBytes {
				return nil, fmt.Errorf("decode normalizer output: %s: error message longer than %d bytes", want, maxErrorBytes)
			}
			results = append(results, normResult{err: sanitize(*l.Error)})
		case *l.Norm == "":
			return nil, fmt.Errorf("decode normalizer output: %s: empty dump", want)
		case len(*l.Norm) > maxNormBytes:
			return nil, fmt.Errorf("decode normalizer output: %s: dump longer than %d bytes", want, maxNormBytes)
		default:
			results = append(results, normResult{norm: *l.Norm})
		}
	}
	if len(rest) != 0 {
		return nil, errors.New("decode normalizer output: data after the last file")
	}
	return results, nil
}

// decodeLine decodes one line: a JSON object whose keys are exactly
// "path" and one of "norm" and "error", each once and spelled exactly, all
// values strings, nothing after the object.
func decodeLine(line []byte) (normLine, error) {
	var l normLine
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return l, errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return l, err
		}
		key, _ := tok.(string)
		if seen[key] {
			return l, fmt.Errorf("duplicate key %q", clip(key))
		}
		seen[key] = true
		tok, err = dec.Token()
		if err != nil {
			return l, err
		}
		val, ok := tok.(string)
		if !ok {
			return l, fmt.Errorf("key %q: want a string", clip(key))
		}
		switch key {
		case "path":
			l.Path = val
		case "norm":
			l.Norm = &val
		case "error":
			l.Error = &val
		default:
			return l, fmt.Errorf("unknown key %q", clip(key))
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return l, errors.New("unterminated object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return l, errors.New("data after the object")
	}
	if !seen["path"] {
		return l, errors.New("no path")
	}
	return l, nil
}

// sanitize makes interpreter text safe to print on one line.
func sanitize(s string) string {
	var b []rune
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			r = ' '
		}
		b = append(b, r)
	}
	return clip(string(b))
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:197] + "..."
	}
	return s
}
