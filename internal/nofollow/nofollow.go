// Package nofollow opens files for reading without following a symlink at
// the final path component, so that a file swapped for a link after its
// tree was listed is refused instead of followed. Bundles, product source
// trees and release trees all read their files through it.
package nofollow
