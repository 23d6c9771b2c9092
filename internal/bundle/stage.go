package bundle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"cacheon/internal/slot"
)

// Staged is a bundle copied into a private directory and loaded from there:
// what runs is the copy, so later edits of the origin cannot change it.
// A Staged bundle has not been scanned; scan.Admit turns it into something
// verify and the engine accept.
type Staged struct {
	// Bundle is the copy, loaded and checked.
	Bundle *Bundle
	// ContentHash is the copy's content hash.
	ContentHash string
	// Origin is the path the bundle was staged from (a directory or an
	// archive), as given.
	Origin string
	// OriginDir is the origin's absolute path, symlinks resolved, when it is
	// a directory ("" for an archive).
	OriginDir string
}

// StageError is a failure to stage a bundle. Step says which part failed:
// "open" (the origin is missing or of the wrong kind: the user's input),
// "copy" (the archive or the directory could not be copied within the
// archive bounds) or "load" (the manifest is invalid; Err is then the
// *ManifestError). Copy and load failures are the bundle's fault.
type StageError struct {
	Step string
	Err  error
}

func (e *StageError) Error() string { return e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// Stage copies src — a bundle directory (through its deterministic
// package, so exactly the files of the content hash are copied) or a
// .tar.gz/.tgz archive (extracted under the archive bounds) — into dest,
// which must not exist, and loads the copy against the slot catalog.
func Stage(ctx context.Context, src, dest string, slots *slot.Catalog) (*Staged, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, &StageError{"open", fmt.Errorf("bundle: %w", err)}
	}
	s := &Staged{Origin: src}
	if st.IsDir() {
		abs, err := filepath.Abs(src)
		if err != nil {
			return nil, &StageError{"open", fmt.Errorf("bundle: %w", err)}
		}
		if s.OriginDir, err = resolveRoot(abs); err != nil {
			return nil, &StageError{"open", fmt.Errorf("bundle: %w", err)}
		}
		if s.ContentHash, err = copyDir(ctx, src, dest); err != nil {
			return nil, &StageError{"copy", err}
		}
	} else {
		if !strings.HasSuffix(src, ".tar.gz") && !strings.HasSuffix(src, ".tgz") {
			return nil, &StageError{"open", fmt.Errorf("bundle %s: want a directory or a .tar.gz archive", src)}
		}
		f, err := os.Open(src)
		if err != nil {
			return nil, &StageError{"open", fmt.Errorf("bundle: %w", err)}
		}
		defer f.Close()
		if s.ContentHash, err = Extract(ctx, f, dest, DefaultExtractLimits(), ""); err != nil {
			return nil, &StageError{"copy", err}
		}
	}
	if s.Bundle, err = Load(dest, slots); err != nil {
		return nil, &StageError{"load", err}
	}
	return s, nil
}

// copyDir copies a bundle directory into dest through its deterministic
// package and returns the content hash; a bundle that changes while it is
// copied is refused.
func copyDir(ctx context.Context, src, dest string) (string, error) {
	pr, pw := io.Pipe()
	packed := make(chan string, 1)
	go func() {
		h, err := Package(src, pw)
		packed <- h
		pw.CloseWithError(err)
	}()
	hash, err := Extract(ctx, pr, dest, DefaultExtractLimits(), "")
	pr.CloseWithError(errors.New("snapshot done"))
	want := <-packed
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", src, err)
	}
	if hash != want {
		return "", fmt.Errorf("snapshot %s: the bundle changed while it was copied", src)
	}
	return hash, nil
}

// Omitted lists what lies under dir that the content hash (and so a staged
// copy) leaves out: Excluded caches and their directories, symlinks and
// other non-regular files, as slash paths. A directory whose Omitted list
// is empty is exactly what its copy holds.
func Omitted(dir string) ([]string, error) {
	root, err := resolveRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("omitted files: %w", err)
	}
	files, err := Files(root)
	if err != nil {
		return nil, fmt.Errorf("omitted files: %w", err)
	}
	kept := make(map[string]bool, len(files))
	for _, f := range files {
		kept[f.Path] = true
	}
	var out []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && Excluded(rel):
			out = append(out, rel)
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case !kept[rel]:
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("omitted files in %s: %w", dir, err)
	}
	return out, nil
}
