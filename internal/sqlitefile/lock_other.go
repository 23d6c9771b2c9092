//go:build !unix

package sqlitefile

import "os"

// lockFile is a no-op where flock is missing: run one process per
// directory.
func lockFile(string) (*os.File, error) { return nil, nil }
