package product

import "cacheon/internal/target"

// Catalog is what the transitions need of the target catalog;
// *target.Catalog implements it.
type Catalog interface {
	// Digest is the catalog digest.
	Digest() string
	// Lookup returns a registered target.
	Lookup(name string) (*target.Target, bool)
	// Activate returns the active set after making name active, refusing
	// an unregistered target or the split of an active atomic target.
	Activate(active []string, name string) (next, displaced []string, err error)
}
