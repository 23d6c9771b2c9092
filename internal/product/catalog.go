package product

// Catalog is what the product transitions need of the registered target
// catalog, in plain values, so that this package depends on no catalog
// implementation. *target.Catalog satisfies it.
type Catalog interface {
	// Digest is the catalog digest.
	Digest() string
	// TargetSpec returns the specification digest of a registered target;
	// ok is false when name is not registered.
	TargetSpec(name string) (spec string, ok bool)
	// Displaces returns the targets a registered target displaces while it
	// is active.
	Displaces(name string) []string
	// Activate returns the active set after making name active, refusing
	// an unregistered target or the split of an active atomic target.
	Activate(active []string, name string) (next, displaced []string, err error)
}
