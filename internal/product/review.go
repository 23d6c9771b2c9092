package product

import (
	"fmt"
	"slices"
)

// Review decisions.
const (
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
)

// Outcomes of a review check or a test.
const (
	OutcomePass = "pass"
	OutcomeFail = "fail"
)

// DomainReview is the canon domain of a review written on its own.
const DomainReview = "cacheon.review"

// ReviewChecks are the ship questions a reviewer answers for a crown,
// each "pass" or "fail".
type ReviewChecks struct {
	// Reproduction against the crowned evaluation stack and the current
	// release context.
	Reproduction string `json:"reproduction"`
	// Correctness and maintained fallback behaviour.
	Correctness string `json:"correctness"`
	// Security review.
	Security string `json:"security"`
	// License and provenance approval.
	License string `json:"license"`
	// Compatibility with active contributions and the pinned runtime.
	Compatibility string `json:"compatibility"`
}

func (c ReviewChecks) each() []struct{ name, v string } {
	return []struct{ name, v string }{
		{"reproduction", c.Reproduction}, {"correctness", c.Correctness}, {"security", c.Security},
		{"license", c.License}, {"compatibility", c.Compatibility},
	}
}

// TestResult is one maintained test a reviewer ran.
type TestResult struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
}

// Review is a maintainer's review of a crown for integration. Humans write
// it (see ReadReview); it is embedded in the integration record.
type Review struct {
	Reviewer string       `json:"reviewer"`
	Decision string       `json:"decision"`
	Checks   ReviewChecks `json:"checks"`
	Tests    []TestResult `json:"tests"`
	// License is the SPDX expression of the integrated source.
	License string `json:"license"`
	// Provenance says where the integrated source came from.
	Provenance string `json:"provenance"`
	Notes      string `json:"notes,omitempty"`
}

// Domain implements Object.
func (*Review) Domain() string { return DomainReview }

// Validate implements Object. An approval needs every check and every
// test (at least one) to pass.
func (r *Review) Validate() error {
	if err := checkText("reviewer", r.Reviewer); err != nil {
		return err
	}
	if r.Decision != DecisionApproved && r.Decision != DecisionRejected {
		return fieldErr("decision", "%q is not %q or %q", r.Decision, DecisionApproved, DecisionRejected)
	}
	approved := r.Decision == DecisionApproved
	for _, c := range r.Checks.each() {
		if c.v != OutcomePass && c.v != OutcomeFail {
			return fieldErr("checks."+c.name, "%q is not %q or %q", c.v, OutcomePass, OutcomeFail)
		}
		if approved && c.v != OutcomePass {
			return fieldErr("checks."+c.name, "is %q, but the decision is %q", c.v, r.Decision)
		}
	}
	if r.Tests == nil {
		return fieldErr("tests", "must be a list, not null")
	}
	if approved && len(r.Tests) == 0 {
		return fieldErr("tests", "an approval lists the maintained tests that passed")
	}
	names := make([]string, len(r.Tests))
	for i, t := range r.Tests {
		f := fmt.Sprintf("tests[%d]", i)
		if err := checkText(f+".name", t.Name); err != nil {
			return err
		}
		if t.Outcome != OutcomePass && t.Outcome != OutcomeFail {
			return fieldErr(f+".outcome", "%q is not %q or %q", t.Outcome, OutcomePass, OutcomeFail)
		}
		if approved && t.Outcome != OutcomePass {
			return fieldErr(f+".outcome", "test %q is %q, but the decision is %q", t.Name, t.Outcome, r.Decision)
		}
		names[i] = t.Name
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fieldErr("tests", "test %q is listed twice", sorted[i])
		}
	}
	if err := checkText("license", r.License); err != nil {
		return err
	}
	if err := checkText("provenance", r.Provenance); err != nil {
		return err
	}
	return checkOptionalText("notes", r.Notes)
}

// ReadReview reads a review file a human wrote: formatting is free (with or
// without the envelope), but duplicate keys, floats, unknown and missing
// fields are rejected and every field is validated.
func ReadReview(data []byte) (Review, error) {
	r, _, err := DecodeLenient[Review](data)
	return r, err
}
