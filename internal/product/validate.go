package product

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"cacheon/internal/canon"
)

// FieldError names the field of an object that broke an invariant. Path is
// the JSON path below the payload, such as "selected_payload.files[2].sha256".
type FieldError struct {
	Path string
	Err  error
}

// Error is "path: message".
func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// fieldErr returns a *FieldError for path with a formatted message.
func fieldErr(path, format string, args ...any) error {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

// within prefixes a nested object's field error with the enclosing path.
func within(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Path: prefix + "." + fe.Path, Err: fe.Err}
	}
	return &FieldError{Path: prefix, Err: err}
}

// checkDigest checks that a digest field holds 64 lowercase hex digits.
func checkDigest(field, s string) error {
	if err := canon.ValidDigest(s); err != nil {
		return &FieldError{Path: field, Err: err}
	}
	return nil
}

// maxText bounds every free-text field.
const maxText = 4096

// checkText checks a required single-line human-readable field.
func checkText(field, s string) error {
	if s == "" {
		return fieldErr(field, "must not be empty")
	}
	return checkOptionalText(field, s)
}

// checkOptionalText checks a single-line field that may be empty.
func checkOptionalText(field, s string) error {
	if len(s) > maxText {
		return fieldErr(field, "is %d bytes long, more than %d", len(s), maxText)
	}
	if !utf8.ValidString(s) {
		return fieldErr(field, "is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fieldErr(field, "contains control character %q", r)
		}
	}
	if strings.TrimSpace(s) != s {
		return fieldErr(field, "has leading or trailing white space")
	}
	return nil
}

// checkName checks an identifier: lowercase ASCII letters, digits and
// ".", "_", "-", starting with a letter or digit, at most 128 bytes.
func checkName(field, s string) error {
	if s == "" {
		return fieldErr(field, "must not be empty")
	}
	if len(s) > 128 {
		return fieldErr(field, "%q is longer than 128 bytes", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fieldErr(field, "%q: character %q at %d is not allowed (want [a-z0-9][a-z0-9._-]*)", s, c, i)
		}
	}
	return nil
}

// CheckPath checks a relative file path inside a tree: slash-separated,
// clean, valid UTF-8 without control characters or backslashes, no empty,
// "." or ".." component, no leading slash, at most 1024 bytes.
func CheckPath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	if len(p) > 1024 {
		return fmt.Errorf("path is %d bytes long, more than 1024", len(p))
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("path %q is not valid UTF-8", p)
	}
	for _, r := range p {
		if unicode.IsControl(r) || r == '\\' {
			return fmt.Errorf("path %q contains %q", p, r)
		}
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q is absolute", p)
	}
	if path.Clean(p) != p {
		return fmt.Errorf("path %q is not clean (want %q)", p, path.Clean(p))
	}
	for _, part := range strings.Split(p, "/") {
		if part == "." || part == ".." || part == "" {
			return fmt.Errorf("path %q has a %q component", p, part)
		}
	}
	return nil
}

// checkPathField is CheckPath reported against a field.
func checkPathField(field, p string) error {
	if err := CheckPath(p); err != nil {
		return &FieldError{Path: field, Err: err}
	}
	return nil
}

// checkSortedUnique checks that keys (one per element of a list field) are
// strictly increasing by bytes, naming the first element out of order.
func checkSortedUnique(field string, keys []string) error {
	for i := 1; i < len(keys); i++ {
		switch {
		case keys[i] == keys[i-1]:
			return fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q appears twice", keys[i])
		case keys[i] < keys[i-1]:
			return fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q is out of order (the list must be sorted by bytes)", keys[i])
		}
	}
	return nil
}

// checkDecimal checks a canonical decimal field.
func checkDecimal(field string, d canon.Decimal) error {
	if err := d.CheckCanonical(); err != nil {
		return &FieldError{Path: field, Err: err}
	}
	return nil
}
