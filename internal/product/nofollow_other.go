//go:build !unix

package product

// oNoFollow is unavailable here; ScanTree still refuses symlinks by type.
const oNoFollow = 0
