package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"cacheon/internal/tensor"
)

// Encode writes tensors and metadata to w as a safetensors file. The output
// is deterministic: tensor data is laid out contiguously ordered by element
// size, largest first, then by name bytewise — so with the 8-byte-padded
// header every tensor starts at an offset aligned to its element size and a
// reader can view it in place; header keys are sorted bytewise (so
// "__metadata__" sits among the names by byte order and each entry's fields
// are data_offsets, dtype, shape); the header is compact JSON padded with
// spaces to a multiple of 8 bytes. A nil or empty metadata map is omitted.
// Names must be non-empty valid UTF-8 other than "__metadata__", metadata
// keys and values valid UTF-8, and every tensor must pass Validate.
func Encode(w io.Writer, tensors map[string]*tensor.Tensor, metadata map[string]string) error {
	hdr, names, err := buildHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("encode safetensors: %w", err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(len(hdr)))
	bw.Write(prefix[:])
	bw.Write(hdr)
	for _, name := range names {
		bw.Write(tensors[name].Data)
	}
	// bufio.Writer keeps the first write error and returns it from Flush.
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("encode safetensors: writing: %w", err)
	}
	return nil
}

// buildHeader validates the inputs and returns the padded JSON header and
// the tensor names in data order.
func buildHeader(tensors map[string]*tensor.Tensor, metadata map[string]string) ([]byte, []string, error) {
	names := make([]string, 0, len(tensors))
	for name, t := range tensors {
		switch {
		case name == "":
			return nil, nil, errors.New("empty tensor name")
		case name == metadataKey:
			return nil, nil, fmt.Errorf("tensor name %q is reserved", metadataKey)
		case !utf8.ValidString(name):
			return nil, nil, fmt.Errorf("tensor name %q is not valid UTF-8", name)
		}
		if err := t.Validate(); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if sa, sb := tensors[a].DType.Size(), tensors[b].DType.Size(); sa != sb {
			return sb - sa
		}
		return strings.Compare(a, b)
	})
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, fmt.Errorf("metadata %q: key and value must be valid UTF-8", k)
		}
	}

	// Top-level keys in byte order, the metadata key among them.
	keys := slices.Clone(names)
	if len(metadata) > 0 {
		keys = append(keys, metadataKey)
	}
	slices.Sort(keys)
	offsets := make(map[string][2]int64, len(names))
	var pos int64
	for _, name := range names {
		n := int64(len(tensors[name].Data))
		offsets[name] = [2]int64{pos, pos + n}
		pos += n
	}

	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(&b, k)
		b.WriteByte(':')
		if k == metadataKey {
			writeMetadata(&b, metadata)
			continue
		}
		t, off := tensors[k], offsets[k]
		b.WriteString(`{"data_offsets":[`)
		b.WriteString(strconv.FormatInt(off[0], 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(off[1], 10))
		b.WriteString(`],"dtype":`)
		writeString(&b, t.DType.SafetensorsName())
		b.WriteString(`,"shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		b.WriteString("]}")
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	return b.Bytes(), names, nil
}

// writeMetadata writes the metadata object with keys in byte order.
func writeMetadata(b *bytes.Buffer, metadata map[string]string) {
	keys := make([]string, 0, len(metadata))
	for k := range metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeString(b, k)
		b.WriteByte(':')
		writeString(b, metadata[k])
	}
	b.WriteByte('}')
}

// writeString writes s as a JSON string: UTF-8 kept raw, only '"', '\' and
// control characters escaped (the canonical JSON rule of the project).
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// WriteFile encodes tensors and metadata (see Encode) to path atomically: it
// writes a temporary file in the same directory, syncs it and renames it
// over path, so readers never observe partial output. The file mode is 0644.
func WriteFile(path string, tensors map[string]*tensor.Tensor, metadata map[string]string) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write safetensors file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := Encode(tmp, tensors, metadata); err != nil {
		return fmt.Errorf("write safetensors file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write safetensors file %s: chmod: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write safetensors file %s: sync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write safetensors file %s: close: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write safetensors file %s: rename: %w", path, err)
	}
	return nil
}

// WriteScratch encodes tensors to path for a consumer that reads it during
// this run only (a worker's job directory): no fsync and no rename, mode
// 0600. A crash leaves at worst a truncated scratch file, which the strict
// reader rejects.
func WriteScratch(path string, tensors map[string]*tensor.Tensor) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write scratch safetensors: %w", err)
	}
	if err := Encode(f, tensors, nil); err != nil {
		f.Close()
		return fmt.Errorf("write scratch safetensors %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write scratch safetensors %s: %w", path, err)
	}
	return nil
}
