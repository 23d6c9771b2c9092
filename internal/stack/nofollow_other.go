//go:build !unix

package stack

// oNoFollow is unavailable here; ScanTree still refuses symlinks by type.
const oNoFollow = 0
