//go:build unix

package bundle

import (
	"os"
	"syscall"
)

// openNoFollow opens name for reading and fails if its final component is a
// symlink, so a file swapped for a link after listing is never followed.
func openNoFollow(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
