package stack_test

import (
	"testing"

	"cacheon/internal/stack"
	"cacheon/internal/stack/stacktest"
	"cacheon/internal/target"
)

const silu = "activation.silu_and_mul"

// world is one consistent set of sample objects.
type world struct {
	cat       *target.Catalog
	arena     stack.Arena
	reference stack.ReferenceManifest
	genesis   stack.EvaluationStack
	candidate stack.CandidateStack
	crown     stack.CrownRecord
	crowned   stack.EvaluationStack
	source    []stack.FileEntry
	record    stack.IntegrationRecord
	review    stack.Review
	base      stack.ReleaseBase
	release   stack.ReleaseManifest
}

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{cat: stacktest.Catalog(t), arena: stacktest.Arena(), review: stacktest.Review()}
	var err error
	if w.reference, err = stack.NewReference(w.arena); err != nil {
		t.Fatal(err)
	}
	w.genesis = stacktest.Genesis(t, w.cat)
	w.crown = stacktest.Crown(t, w.cat, w.genesis, silu, "miner-1")
	if w.candidate, err = stack.Candidate(w.cat, w.genesis, silu, w.crown.Attribution.Proposal); err != nil {
		t.Fatal(err)
	}
	if w.crowned, err = stack.ApplyCrown(w.cat, w.genesis, w.crown); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stacktest.WriteTree(t, dir, stacktest.SourceFiles(stacktest.Payload(silu), stacktest.Prefix))
	if w.source, err = stack.ScanTree(dir, stack.SourceSkip); err != nil {
		t.Fatal(err)
	}
	if w.record, err = stack.Integrate(w.crown, w.source, stacktest.Prefix, w.review); err != nil {
		t.Fatal(err)
	}
	w.base = stacktest.Base(t)
	sd, err := stack.SourceDigest(w.source)
	if err != nil {
		t.Fatal(err)
	}
	if w.release, err = stack.NewRelease(w.cat, w.base, map[string]string{"engine": sd}, []stack.IntegrationRecord{w.record}); err != nil {
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
	obj  stack.Object
}

// readers maps a domain to its strict reader, returning the digest.
func readers() map[string]func([]byte) (string, error) {
	return map[string]func([]byte) (string, error){
		stack.DomainArena:             read[stack.Arena],
		stack.DomainReference:         read[stack.ReferenceManifest],
		stack.DomainEvaluationStack:   read[stack.EvaluationStack],
		stack.DomainCandidateStack:    read[stack.CandidateStack],
		stack.DomainCrown:             read[stack.CrownRecord],
		stack.DomainIntegrationRecord: read[stack.IntegrationRecord],
		stack.DomainReview:            read[stack.Review],
		stack.DomainReleaseBase:       read[stack.ReleaseBase],
		stack.DomainReleaseManifest:   read[stack.ReleaseManifest],
	}
}

func read[T any, P interface {
	*T
	stack.Object
}](b []byte) (string, error) {
	_, d, err := stack.Decode[T, P](b)
	return d, err
}
