package product_test

import (
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
	"cacheon/internal/target"
)

const silu = "activation.silu_and_mul"

// world is one consistent set of sample objects.
type world struct {
	cat       *target.Catalog
	arena     product.Arena
	reference product.ReferenceManifest
	genesis   product.EvaluationStack
	candidate product.CandidateStack
	crown     product.CrownRecord
	crowned   product.EvaluationStack
	source    []product.FileEntry
	record    product.IntegrationRecord
	review    product.Review
	base      product.ReleaseBase
	release   product.ReleaseManifest
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{cat: producttest.Catalog(t), arena: producttest.Arena(), review: producttest.Review()}
	var err error
	if w.reference, err = product.NewReference(w.arena); err != nil {
		t.Fatal(err)
	}
	w.genesis = producttest.Genesis(t, w.cat)
	w.crown = producttest.Crown(t, w.cat, w.genesis, silu, "miner-1")
	if w.candidate, err = product.Candidate(w.cat, w.genesis, silu, w.crown.Attribution.Proposal); err != nil {
		t.Fatal(err)
	}
	if w.crowned, err = product.ApplyCrown(w.cat, w.genesis, w.crown); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	producttest.WriteTree(t, dir, producttest.SourceFiles(producttest.Payload(silu), producttest.Prefix))
	if w.source, err = product.ScanTree(dir, product.SourceSkip); err != nil {
		t.Fatal(err)
	}
	if w.record, err = product.Integrate(w.crown, w.source, producttest.Prefix, w.review); err != nil {
		t.Fatal(err)
	}
	w.base = producttest.Base(t)
	sd, err := product.SourceDigest(w.source)
	if err != nil {
		t.Fatal(err)
	}
	if w.release, err = product.NewRelease(w.cat, w.base, map[string]string{"engine": sd}, []product.IntegrationRecord{w.record}); err != nil {
		t.Fatal(err)
	}
	return w
}

// objects returns every sample object by a short name.
func (w *world) objects() []namedObject {
	return []namedObject{
		{"arena", &w.arena},
		{"reference", &w.reference},
		{"genesis_stack", &w.genesis},
		{"candidate_stack", &w.candidate},
		{"crown", &w.crown},
		{"crowned_stack", &w.crowned},
		{"integration_record", &w.record},
		{"review", &w.review},
		{"release_base", &w.base},
		{"release_manifest", &w.release},
	}
}

type namedObject struct {
	name string
	obj  product.Object
}

// readers maps a domain to its strict reader, returning the digest.
func readers() map[string]func([]byte) (string, error) {
	return map[string]func([]byte) (string, error){
		product.DomainArena:             read[product.Arena],
		product.DomainReference:         read[product.ReferenceManifest],
		product.DomainEvaluationStack:   read[product.EvaluationStack],
		product.DomainCandidateStack:    read[product.CandidateStack],
		product.DomainCrown:             read[product.CrownRecord],
		product.DomainIntegrationRecord: read[product.IntegrationRecord],
		product.DomainReview:            read[product.Review],
		product.DomainReleaseBase:       read[product.ReleaseBase],
		product.DomainReleaseManifest:   read[product.ReleaseManifest],
	}
}

func read[T any, P interface {
	*T
	product.Object
}](b []byte) (string, error) {
	_, d, err := product.Decode[T, P](b)
	return d, err
}
