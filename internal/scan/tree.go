package scan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// headBytes is how much of every file is searched for a NUL byte.
const headBytes = 8 << 10

// tree is the result of walking a bundle without following links.
type tree struct {
	root     string
	files    []string               // regular files, slash paths, sorted bytewise
	info     map[string]fs.FileInfo // Lstat of each regular file
	flagged  map[string]bool        // files that already have a file-level finding
	findings []Finding
}

// walkTree lists root. Symlinks are reported, never followed; dot-dirs and
// __pycache__ are reported and not entered; names that could forge output
// (invalid UTF-8, control characters) are reported and skipped.
func walkTree(root string) (*tree, error) {
	st, err := os.Lstat(root)
	if err != nil {
		return nil, fmt.Errorf("stat bundle root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("stat bundle root: %s is not a directory", root)
	}
	t := &tree{
		root:    root,
		info:    make(map[string]fs.FileInfo),
		flagged: make(map[string]bool),
	}
	err = filepath.WalkDir(root, func(full string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return fmt.Errorf("walk bundle: %w", werr)
		}
		if full == root {
			return nil
		}
		rel, err := filepath.Rel(root, full)
		if err != nil {
			return fmt.Errorf("walk bundle: %w", err)
		}
		rel = filepath.ToSlash(rel)
		return t.visit(full, rel, d)
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(t.files)
	return t, nil
}

// visit classifies one entry; it returns fs.SkipDir for directories that
// are reported instead of entered.
func (t *tree) visit(full, rel string, d fs.DirEntry) error {
	name := d.Name()
	skip := func() error {
		if d.IsDir() {
			return fs.SkipDir
		}
		return nil
	}
	switch {
	case !cleanName(rel):
		t.add(rel, RuleBadFilename, "the path is not valid UTF-8 or contains control characters; rename it")
		return skip()
	case d.Type()&fs.ModeSymlink != 0:
		t.add(rel, RuleSymlink, "symbolic links are not allowed in a bundle; copy the file in or remove the link")
		return nil
	case d.IsDir() && name == "__pycache__":
		t.add(rel, RuleBinaryFile, "__pycache__ holds compiled bytecode; package the bundle without it")
		return fs.SkipDir
	case d.IsDir() && strings.HasPrefix(name, "."):
		t.add(rel, RuleHiddenDir, "hidden directories (such as .git) must not be packaged; remove it from the bundle")
		return fs.SkipDir
	case d.IsDir():
		return nil
	case !d.Type().IsRegular():
		t.add(rel, RuleSpecialFile, "devices, pipes and sockets are not allowed in a bundle; remove it")
		return nil
	}
	info, err := d.Info()
	if err != nil {
		return fmt.Errorf("walk bundle: stat %s: %w", rel, err)
	}
	t.files = append(t.files, rel)
	t.info[rel] = info
	return nil
}

// add records a file-level finding.
func (t *tree) add(rel, rule, msg string) {
	t.flagged[rel] = true
	t.findings = append(t.findings, Finding{Path: displayPath(rel), Rule: rule, Message: msg})
}

// read returns up to limit bytes of a regular file found by the walk, and
// whether the file is longer than limit. It refuses a file that was
// replaced since the walk (for example by a symlink).
func (t *tree) read(rel string, limit int64) ([]byte, bool, error) {
	f, err := os.Open(filepath.Join(t.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", rel, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", rel, err)
	}
	if !st.Mode().IsRegular() || !os.SameFile(st, t.info[rel]) {
		return nil, false, fmt.Errorf("read %s: the file changed during the scan", rel)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", rel, err)
	}
	if int64(len(data)) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}

// Extension classes of the file rules (compared in lower case).
func binaryExt(ext string) bool {
	switch ext {
	case ".so", ".o", ".a", ".bin", ".pyc", ".pyo", ".pyd", ".dll", ".dylib",
		".exe", ".whl", ".egg", ".zip", ".tar", ".gz", ".pt", ".pth", ".ckpt",
		".safetensors", ".npy", ".npz", ".pkl", ".pickle", ".cubin",
		".fatbin", ".ptx":
		return true
	}
	return false
}

func nativeExt(ext string) bool {
	switch ext {
	case ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx":
		return true
	}
	return false
}

func cudaExt(ext string) bool {
	switch ext {
	case ".cu", ".cuh", ".cuda":
		return true
	}
	return false
}

// classify applies the extension rules to every regular file and the NUL
// rule to the ones that are not Python sources (the caller checks those
// while reading them whole). declaredCUDA holds the manifest's CUDA sources.
func (t *tree) classify(declaredCUDA map[string]bool) error {
	for _, rel := range t.files {
		ext := strings.ToLower(path.Ext(rel))
		switch {
		case binaryExt(ext):
			t.add(rel, RuleBinaryFile, "compiled or binary artifacts are not allowed; ship sources only")
		case nativeExt(ext):
			t.add(rel, RuleNativeSource, "C/C++ sources are not allowed in a bundle; write the kernel in triton or a declared .cu source")
		case cudaExt(ext) && !declaredCUDA[rel]:
			t.add(rel, RuleUndeclaredCUDA, "CUDA source not declared in manifest.toml; declare it as a CUDA source or remove it")
		case path.Ext(rel) == ".py":
			// read whole by the caller
		default:
			head, _, err := t.read(rel, headBytes)
			if err != nil {
				return err
			}
			if bytes.IndexByte(head, 0) >= 0 {
				t.add(rel, RuleBinaryFile, "the file contains NUL bytes, so it is binary; ship text sources only")
			}
		}
	}
	return nil
}

// cleanName reports whether a relative path is safe to print verbatim.
func cleanName(rel string) bool {
	if !utf8.ValidString(rel) {
		return false
	}
	for _, r := range rel {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

// displayPath returns rel, quoted when it could not be printed verbatim.
func displayPath(rel string) string {
	if cleanName(rel) {
		return rel
	}
	return fmt.Sprintf("%q", rel)
}

// checkDeclared explains why a declared path is not usable, or returns nil.
func checkDeclared(p string) error {
	switch {
	case p == "" || p == ".":
		return errors.New("is empty")
	case !cleanName(p):
		return errors.New("contains control characters or invalid UTF-8")
	case strings.Contains(p, `\`):
		return errors.New("must use forward slashes")
	case path.IsAbs(p):
		return errors.New("must be relative to the bundle root")
	case path.Clean(p) != p:
		return errors.New("is not a clean path")
	case p == ".." || strings.HasPrefix(p, "../"):
		return errors.New("points outside the bundle")
	}
	return nil
}
