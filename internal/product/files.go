package product

import (
	"fmt"
	"os"
)

// ReadFile reads the object of type T kept in the file path, strictly
// (DecodeFile: the canonical bytes, optionally followed by one newline),
// and returns it with its digest. An unreadable file gives the read error
// as it is (it names the path); a malformed object gives "PATH: reason".
func ReadFile[T any, P interface {
	*T
	Object
}](path string) (T, string, error) {
	return readFile[T](path, DecodeFile[T, P])
}

// ReadLenientFile reads a T that a human wrote into the file path
// (DecodeLenient: formatting free, fields strict). Errors are as ReadFile's.
func ReadLenientFile[T any, P interface {
	*T
	Object
}](path string) (T, string, error) {
	return readFile[T](path, DecodeLenient[T, P])
}

func readFile[T any](path string, decode func([]byte) (T, string, error)) (T, string, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, "", err
	}
	v, d, err := decode(data)
	if err != nil {
		return zero, "", fmt.Errorf("%s: %w", path, err)
	}
	return v, d, nil
}

// ReadFiles reads one T from each of paths with ReadFile, in order,
// stopping at the first error.
func ReadFiles[T any, P interface {
	*T
	Object
}](paths []string) ([]T, error) {
	var out []T
	for _, p := range paths {
		v, _, err := ReadFile[T, P](p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// ScanSource lists a reviewed source tree — ScanTree with SourceSkip — and
// returns the listing with its source tree digest.
func ScanSource(dir string) ([]FileEntry, string, error) {
	l, err := ScanTree(dir, SourceSkip)
	if err != nil {
		return nil, "", err
	}
	d, err := SourceDigest(l)
	if err != nil {
		return nil, "", fmt.Errorf("source tree %s: %w", dir, err)
	}
	return l, d, nil
}
