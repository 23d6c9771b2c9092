//go:build !unix

package localchain

import "os"

// lockDir is a no-op where flock is missing: run one node per directory.
func lockDir(dir string) (*os.File, error) { return nil, nil }
