//go:build !unix

package bundle

import (
	"fmt"
	"os"
)

// openNoFollow opens name for reading after checking that it is not a
// symlink (this platform has no O_NOFOLLOW).
func openNoFollow(name string) (*os.File, error) {
	info, err := os.Lstat(name)
	if err != nil {
		return nil, err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s is a symlink", name)
	}
	return os.Open(name)
}
