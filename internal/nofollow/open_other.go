//go:build !unix

package nofollow

import (
	"fmt"
	"os"
)

// Open opens name for reading after checking that its final component is
// not a symlink (this platform has no O_NOFOLLOW, so the check and the
// open are two steps; callers re-check the opened file's type).
func Open(name string) (*os.File, error) {
	info, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is a symlink", name)
	}
	return os.Open(name)
}
