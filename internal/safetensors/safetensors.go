// Package safetensors reads and writes the safetensors tensor file format
// strictly: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// header (an object mapping tensor names to {"dtype", "shape",
// "data_offsets"}, plus an optional "__metadata__" object of strings,
// optionally padded with spaces), then the data buffer that the tensors'
// data_offsets (relative to the buffer start) must cover exactly, without
// overlaps, holes or trailing bytes.
//
// Everything read is treated as hostile: the reader enforces Limits, rejects
// duplicate keys, unknown fields and malformed numbers, and never panics.
// The writer is deterministic, so equal inputs give byte-identical files.
package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"cacheon/internal/tensor"
)

// Default limits applied where a Limits field is zero or negative.
const (
	DefaultMaxHeaderBytes = 1 << 20
	DefaultMaxTotalBytes  = 1 << 32
	DefaultMaxTensors     = 4096
)

// Limits bounds what the reader accepts. Zero (or negative) fields take the
// defaults.
type Limits struct {
	MaxHeaderBytes int64 // largest JSON header; default 1 MiB
	MaxTotalBytes  int64 // largest data buffer; default 4 GiB
	MaxTensors     int   // most tensors in one file; default 4096
}

// withDefaults returns l with defaults filled in.
func (l Limits) withDefaults() Limits {
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if l.MaxTensors <= 0 {
		l.MaxTensors = DefaultMaxTensors
	}
	return l
}

// File is a decoded safetensors file.
type File struct {
	Metadata map[string]string         // nil when the header has no "__metadata__"
	Tensors  map[string]*tensor.Tensor // by name
	Order    []string                  // names sorted by data offset
}

// FormatError reports input that violates the safetensors format or the
// reader's limits. Tensor names the offending tensor ("" for file-level
// problems) and Field the header field involved ("" if none).
type FormatError struct {
	Tensor string
	Field  string
	Reason string
	Err    error // underlying cause, if any
}

// Error formats the problem as `tensor "x": field: reason: cause`.
func (e *FormatError) Error() string {
	var b bytes.Buffer
	if e.Tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", clip(e.Tensor))
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *FormatError) Unwrap() error { return e.Err }

// formatErr builds a FormatError without a cause.
func formatErr(name, field, reason string) *FormatError {
	return &FormatError{Tensor: name, Field: field, Reason: reason}
}

// Decode parses a complete safetensors file held in b. The returned tensors
// own copies of their bytes; b is not retained.
func Decode(b []byte, lim Limits) (*File, error) {
	lim = lim.withDefaults()
	f, err := decode(b, lim, true)
	if err != nil {
		return nil, fmt.Errorf("decode safetensors: %w", err)
	}
	return f, nil
}

// decode parses b; when copyData is false the tensors alias b.
func decode(b []byte, lim Limits, copyData bool) (*File, error) {
	if len(b) < 8 {
		return nil, formatErr("", "header length", fmt.Sprintf("file of %d bytes is shorter than the 8-byte length prefix", len(b)))
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if err := checkHeaderLen(n, lim); err != nil {
		return nil, err
	}
	if n > uint64(len(b)-8) {
		return nil, formatErr("", "header length", fmt.Sprintf("%d exceeds the %d bytes after the length prefix", n, len(b)-8))
	}
	hd, err := parseHeader(b[8:8+n], lim)
	if err != nil {
		return nil, err
	}
	data := b[8+n:]
	if int64(len(data)) > lim.MaxTotalBytes {
		return nil, formatErr("", "data", fmt.Sprintf("buffer of %d bytes exceeds the limit of %d", len(data), lim.MaxTotalBytes))
	}
	if err := checkLayout(hd.entries, int64(len(data))); err != nil {
		return nil, err
	}
	return assemble(hd, data, copyData), nil
}

// checkHeaderLen applies the header-size limit to the declared length n.
func checkHeaderLen(n uint64, lim Limits) error {
	if n > uint64(lim.MaxHeaderBytes) {
		return formatErr("", "header length", fmt.Sprintf("%d exceeds the limit of %d bytes", n, lim.MaxHeaderBytes))
	}
	if n < 2 {
		return formatErr("", "header length", fmt.Sprintf("%d is too short for a JSON object", n))
	}
	return nil
}

// checkLayout verifies every entry against a data buffer of bufLen bytes:
// shapes, byte sizes and offsets, then that the entries tile the buffer
// exactly (no overlap, no hole, no trailing bytes).
func checkLayout(entries []entry, bufLen int64) error {
	for _, e := range entries {
		sp := tensor.Spec{Shape: e.shape, DType: e.dtype}
		if err := sp.Validate(); err != nil {
			return &FormatError{Tensor: e.name, Field: "shape", Reason: "invalid", Err: err}
		}
		if e.begin > e.end {
			return formatErr(e.name, "data_offsets", fmt.Sprintf("begin %d is after end %d", e.begin, e.end))
		}
		if e.end > bufLen {
			return formatErr(e.name, "data_offsets", fmt.Sprintf("end %d is beyond the %d-byte data buffer", e.end, bufLen))
		}
		// Validate bounds NumElements·Size by tensor.MaxBytes: no overflow.
		if want := int64(sp.NumElements()) * int64(e.dtype.Size()); e.end-e.begin != want {
			return formatErr(e.name, "data_offsets", fmt.Sprintf("span of %d bytes does not match %s%v (%d bytes)", e.end-e.begin, e.dtype, e.shape, want))
		}
	}
	sorted := sortedEntries(entries)
	var pos int64
	var prev string
	for _, e := range sorted {
		switch {
		case e.begin < pos:
			return formatErr(e.name, "data_offsets", fmt.Sprintf("[%d,%d] overlaps tensor %q ending at %d", e.begin, e.end, clip(prev), pos))
		case e.begin > pos:
			return formatErr(e.name, "data_offsets", fmt.Sprintf("[%d,%d] leaves a hole of %d bytes at offset %d", e.begin, e.end, e.begin-pos, pos))
		}
		pos, prev = e.end, e.name
	}
	if pos != bufLen {
		return formatErr("", "data", fmt.Sprintf("%d trailing bytes after the last tensor (offset %d of %d)", bufLen-pos, pos, bufLen))
	}
	return nil
}

// sortedEntries returns the entries ordered by (begin, end, name).
func sortedEntries(entries []entry) []entry {
	s := slices.Clone(entries)
	slices.SortFunc(s, func(a, b entry) int {
		if c := cmp.Compare(a.begin, b.begin); c != 0 {
			return c
		}
		if c := cmp.Compare(a.end, b.end); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	return s
}

// assemble builds the File from a validated header and data buffer.
func assemble(hd *header, data []byte, copyData bool) *File {
	f := &File{
		Metadata: hd.metadata,
		Tensors:  make(map[string]*tensor.Tensor, len(hd.entries)),
		Order:    make([]string, 0, len(hd.entries)),
	}
	for _, e := range sortedEntries(hd.entries) {
		raw := data[e.begin:e.end:e.end]
		if copyData {
			raw = bytes.Clone(raw)
			if raw == nil {
				raw = []byte{}
			}
		}
		f.Tensors[e.name] = &tensor.Tensor{DType: e.dtype, Shape: e.shape, Data: raw}
		f.Order = append(f.Order, e.name)
	}
	return f
}

// Read parses a safetensors stream. It reads the header, then exactly the
// data buffer the header describes (at most MaxTotalBytes), and fails if the
// stream ends early or if any byte follows the buffer.
func Read(r io.Reader, lim Limits) (*File, error) {
	f, err := read(r, lim.withDefaults(), -1)
	if err != nil {
		return nil, fmt.Errorf("read safetensors: %w", err)
	}
	return f, nil
}

// read implements Read with limits already defaulted. fileSize, when not
// negative, is the size of the regular file r reads: if the header agrees
// with it, the data buffer is allocated once at its exact size.
func read(r io.Reader, lim Limits, fileSize int64) (*File, error) {
	var prefix [8]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, &FormatError{Field: "header length", Reason: "reading the 8-byte length prefix", Err: err}
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if err := checkHeaderLen(n, lim); err != nil {
		return nil, err
	}
	h := make([]byte, n)
	if _, err := io.ReadFull(r, h); err != nil {
		return nil, &FormatError{Field: "header", Reason: fmt.Sprintf("reading %d header bytes", n), Err: err}
	}
	hd, err := parseHeader(h, lim)
	if err != nil {
		return nil, err
	}
	// The buffer must be covered exactly, so its size is the largest end.
	var size int64
	for _, e := range hd.entries {
		size = max(size, e.end)
	}
	if size > lim.MaxTotalBytes {
		return nil, formatErr("", "data", fmt.Sprintf("header describes %d bytes, which exceeds the limit of %d", size, lim.MaxTotalBytes))
	}
	if err := checkLayout(hd.entries, size); err != nil {
		return nil, err
	}
	var data []byte
	if fileSize >= 0 && fileSize == 8+int64(n)+size {
		// The file on disk has exactly the size the header describes: one
		// allocation, one read.
		data = make([]byte, size)
		if got, err := io.ReadFull(r, data); err != nil {
			return nil, formatErr("", "data", fmt.Sprintf("truncated: header describes %d bytes, file gave %d (%v)", size, got, err))
		}
	} else {
		// Grow with the bytes that actually arrive rather than trusting the
		// header for one large allocation.
		buf := bytes.NewBuffer(make([]byte, 0, min(size, 1<<20)))
		if _, err := buf.ReadFrom(io.LimitReader(r, size)); err != nil {
			return nil, fmt.Errorf("reading the data buffer: %w", err)
		}
		if int64(buf.Len()) != size {
			return nil, formatErr("", "data", fmt.Sprintf("truncated: header describes %d bytes, stream has %d", size, buf.Len()))
		}
		data = buf.Bytes()
	}
	var one [1]byte
	switch _, err := io.ReadFull(r, one[:]); {
	case err == nil:
		return nil, formatErr("", "data", fmt.Sprintf("trailing bytes after the %d-byte data buffer", size))
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("checking for trailing bytes: %w", err)
	}
	return assemble(hd, data, false), nil
}

// ReadFile reads and parses the safetensors file at path (see Read).
func ReadFile(path string, lim Limits) (*File, error) {
	lim = lim.withDefaults()
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read safetensors file: %w", err)
	}
	defer fh.Close()
	fileSize := int64(-1)
	if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() {
		fileSize = st.Size()
		if size := st.Size(); size >= 8 {
			var prefix [8]byte
			if _, err := io.ReadFull(fh, prefix[:]); err != nil {
				return nil, fmt.Errorf("read safetensors file %s: %w", path, err)
			}
			if n := binary.LittleEndian.Uint64(prefix[:]); n > uint64(size-8) && n <= uint64(lim.MaxHeaderBytes) {
				return nil, fmt.Errorf("read safetensors file %s: %w", path,
					formatErr("", "header length", fmt.Sprintf("%d exceeds the %d bytes after the length prefix", n, size-8)))
			}
			if _, err := fh.Seek(0, io.SeekStart); err != nil {
				return nil, fmt.Errorf("read safetensors file %s: %w", path, err)
			}
		}
	}
	f, err := read(fh, lim, fileSize)
	if err != nil {
		return nil, fmt.Errorf("read safetensors file %s: %w", path, err)
	}
	return f, nil
}
