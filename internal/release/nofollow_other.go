//go:build !unix

package release

// oNoFollow is unavailable here; trees are scanned for symlinks first.
const oNoFollow = 0
