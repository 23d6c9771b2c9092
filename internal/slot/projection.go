package slot

import (
	"fmt"
	"sort"

	"cacheon/internal/canon"
)

// ContractDomain is the canon domain of a frozen slot contract projection.
const ContractDomain = "cacheon.slot_contract"

// Contract is the frozen, data-only projection of a slot: everything that
// decides what a candidate must compute and how it is judged. Its digest is
// part of every target specification digest, so a target name alone never
// identifies a contract.
type Contract struct {
	Name             string      `json:"name"`
	Kind             Kind        `json:"kind"`
	Entry            string      `json:"entry"`
	Args             []Arg       `json:"args"`
	Prepare          string      `json:"prepare,omitempty"`
	PrepareArgs      []Arg       `json:"prepare_args,omitempty"`
	GraphDynamic     []string    `json:"graph_dynamic"`
	Reference        string      `json:"reference"`
	Shapes           []Shape     `json:"shapes"`
	Distributions    []string    `json:"distributions"`
	Correctness      Correctness `json:"correctness"`
	DescriptorFields []string    `json:"descriptor_fields"`
	QualityThreshold string      `json:"quality_threshold,omitempty"`
	OutputAlignment  int         `json:"output_alignment"`
	InputGenerator   string      `json:"input_generator"`
}

// Contract returns the slot's frozen projection.
func (s *Spec) Contract() Contract {
	dists := make([]string, 0, len(Distributions()))
	for _, d := range Distributions() {
		dists = append(dists, string(d))
	}
	gd := append([]string(nil), s.GraphDynamic...)
	sort.Strings(gd)
	return Contract{
		Name: s.Name, Kind: s.Kind, Entry: s.Entry, Args: s.Args,
		Prepare: s.Prepare, PrepareArgs: s.PrepareArgs,
		GraphDynamic: gd, Reference: s.Reference, Shapes: s.Shapes,
		Distributions: dists, Correctness: s.Correctness,
		DescriptorFields: s.DescriptorFields, QualityThreshold: s.QualityThreshold,
		OutputAlignment: OutputAlignment, InputGenerator: InputGenerator,
	}
}

// ContractDigest is the canon digest of the slot's Contract.
func (s *Spec) ContractDigest() (string, error) {
	d, err := canon.Digest(ContractDomain, 1, s.Contract())
	if err != nil {
		return "", fmt.Errorf("slot %s: contract digest: %w", s.Name, err)
	}
	return d, nil
}
