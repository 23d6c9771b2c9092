// Package slot is the executable catalog of Cacheon's slots: the
// validator-owned tensor boundaries that candidate kernels may fill.
//
// A Spec binds every semantic detail that verification and live dispatch
// share: the dotted name and kind, the entry (and optional prepare) callable
// with its positional arguments, the deterministic input generator and the
// registered verification shapes, the output contract, the graph-dynamic
// inputs, the correctness policy with per-dtype tolerances, the trusted
// reference and, for collectives, the per-rank partial and cross-rank
// reduction. The catalog is built explicitly by NewCatalog; nothing registers
// itself.
package slot

import (
	"fmt"
	"sort"
)

// Kind is the breadth of a slot's boundary.
type Kind string

// The three slot kinds of the slot contract.
const (
	Op         Kind = "op"         // one fused operation
	Block      Kind = "block"      // several operations behind one tensor contract
	Collective Kind = "collective" // owns a cross-rank communication step
)

// Catalog is the set of registered slots, keyed by dotted name.
type Catalog struct {
	specs map[string]*Spec
	order []string
}

// Lookup returns the slot registered under name.
func (c *Catalog) Lookup(name string) (*Spec, bool) {
	s, ok := c.specs[name]
	return s, ok
}

// Specs returns every slot sorted by name (bytewise).
func (c *Catalog) Specs() []*Spec {
	out := make([]*Spec, 0, len(c.order))
	for _, n := range c.order {
		out = append(out, c.specs[n])
	}
	return out
}

// Names returns the registered slot names sorted bytewise.
func (c *Catalog) Names() []string { return append([]string(nil), c.order...) }

func newCatalog(specs ...*Spec) (*Catalog, error) {
	c := &Catalog{specs: make(map[string]*Spec, len(specs))}
	for _, s := range specs {
		if err := s.validate(); err != nil {
			return nil, fmt.Errorf("slot %s: %w", s.Name, err)
		}
		if _, dup := c.specs[s.Name]; dup {
			return nil, fmt.Errorf("slot %s registered twice", s.Name)
		}
		c.specs[s.Name] = s
		c.order = append(c.order, s.Name)
	}
	sort.Strings(c.order)
	return c, nil
}

// ArgKind says what the validator passes in one positional argument.
type ArgKind string

// Argument kinds of an entry call.
const (
	ArgInput    ArgKind = "input"    // validator-generated tensor
	ArgOutput   ArgKind = "output"   // validator-allocated tensor the candidate fills
	ArgScalar   ArgKind = "scalar"   // Python scalar (float, int or bool)
	ArgPrepared ArgKind = "prepared" // the value prepare returned
	ArgGroup    ArgKind = "group"    // the collective's process group
)

// Arg is one positional argument of an entry or prepare call.
//
// Shape entries are dimension expressions over the case's Dims: a product of
// factors joined by '*', each factor a dimension name, a decimal integer or
// cdiv(a,b) (ceiling division of two names or integers). DType is "vdt" (the
// verify dtype) or a concrete torch dtype name. Scalar arguments carry an
// expression in Value: a decimal literal, a dimension name, or rsqrt(NAME).
type Arg struct {
	Name  string   `json:"name"`
	Kind  ArgKind  `json:"kind"`
	DType string   `json:"dtype,omitempty"`
	Shape []string `json:"shape,omitempty"`
	// RowPad, when > 0, pads the row stride of an output's last dimension up
	// to a multiple of RowPad elements, so the output is deliberately strided.
	RowPad int `json:"row_pad,omitempty"`
	// Scalar is "float", "int" or "bool" for ArgScalar.
	Scalar string `json:"scalar,omitempty"`
	Value  string `json:"value,omitempty"`
	// PerRank marks collective inputs whose values differ across ranks.
	PerRank bool `json:"per_rank,omitempty"`
	// Gen names the input generator (see generators in case.go): "values"
	// (the case's distribution), "norm_weight", "linear_weight",
	// "topk_ids", "topk_weights", "seq_lens", "block_table", "row_map".
	Gen string `json:"gen,omitempty"`
	// Range is the exclusive (ids, pages, rows) or inclusive (seq_lens)
	// upper bound expression of an integer generator.
	Range string `json:"range,omitempty"`
	// Shard, for a prepare argument of a collective, names how the full
	// tensor is split across ranks ("moe_tp": tensor-parallel over the
	// intermediate dimension); Shape then gives the per-rank shard.
	Shard string `json:"shard,omitempty"`
}

// Shape is one registered verification shape: concrete dimensions plus the
// count dimensions that verification may jitter from the run's seed.
type Shape struct {
	Name   string         `json:"name"`
	Dims   map[string]int `json:"dims"`
	Jitter []string       `json:"jitter,omitempty"`
}

// Spec is one registered slot.
type Spec struct {
	Name  string // canonical dotted name, e.g. "norm.rmsnorm"
	Kind  Kind
	Entry string // required entry callable
	Args  []Arg  // entry arguments in positional order
	// Prepare, when non-empty, is the optional prepare callable; it receives
	// PrepareArgs (names of Args-independent weight inputs) once and returns
	// the prepared state passed as the ArgPrepared argument.
	Prepare     string
	PrepareArgs []Arg
	// GraphDynamic names the inputs whose values may change between graph
	// replays while their addresses and shapes stay fixed.
	GraphDynamic []string
	Shapes       []Shape
	Correctness  Correctness
	// DescriptorFields lists the capability fields the slot's live binding
	// supplies; a variant predicate on any other field can never match.
	DescriptorFields []string
	// QualityThreshold is an optional slot-specific end-to-end quality
	// threshold as a canonical decimal string ("" when none).
	QualityThreshold string
	// Description is one line for humans.
	Description string
	// Reference names the trusted reference function for the projection.
	Reference string
	// Count is the dimension that carries the slot's token (or batch)
	// count and MaxCount its registered maximum: besides the registered
	// shapes, verify runs the smallest shape at count 1, at MaxCount and
	// at a count drawn over [1, MaxCount], and no variant domain is
	// exercised above MaxCount.
	Count    string
	MaxCount int
	// Work, when set, is an expression over the dimensions for the
	// multiply-adds of one call's reference (the MoE slots': every token's
	// K experts, three GEMMs of H×I each). Verify's planner gives a shape
	// whose count-independent inputs (expert weights) are too many for
	// the element bound of its large counts a large count bounded by this
	// work instead (internal/verify, wideCount). Not part of the
	// Contract projection.
	Work string
	// ScalarRanges are the legal ranges of the scalar arguments that take
	// more than their registered value (Arg.Value), by argument name;
	// verify draws each case's value over the range (CaseParams.ScalarPoint).
	// Count, MaxCount and ScalarRanges are not yet part of the frozen
	// Contract projection (its digest is pinned by released records).
	ScalarRanges map[string]ScalarRange
	// ServedShapes are further shapes verify runs every row on: the
	// dimensions the shipped arenas serve the slot at (a kernel tiled for
	// at most the registered shapes' widths is wrong only there). Like
	// ScalarRanges they are not part of the Contract projection.
	ServedShapes []Shape
	// ProbeShapes are further shapes verify runs every row on that
	// neither the registered nor the served ones reach, where inputs the
	// contract allows expose a kernel (sdpa's long prefix and decode's long
	// sequences, under the attention sinks of sinks.go). Not part of the
	// Contract projection.
	ProbeShapes []Shape
	// OutlierMax is the largest outlier magnitude of the heavy-tailed
	// inputs (0: the generator's 96). The slots whose outputs depend on
	// each input element through an elementwise or per-row function (the
	// activation, the norms, the cross-rank sums: largeOutlierMax in
	// catalog.go says which and why) raise it to 4096: served hidden
	// states carry massive activations in the hundreds and thousands, and
	// an honest kernel's error there stays relative to each element. Not
	// part of the Contract projection either.
	OutlierMax float64
	// ServingPad, when set, is how serving pads a dimension (see
	// ServingPad and Spec.PadShape).
	ServingPad *ServingPad
	// OutlierProduct marks a slot whose output multiplies two of its
	// inputs elementwise (silu_and_mul's gate·up): an honest product of
	// two outliers must stay finite, so in float16 each gate·up pair's
	// product is capped (capProducts, gates.go) while either factor may
	// reach OutlierBound.
	OutlierProduct bool
	// PadRows names the inputs whose leading dimension is Count and
	// whose last rows serving's CUDA-graph padding makes bit-identical
	// (padrows.go); a paged slot's pad rows also take the engine's
	// length and table row. Not part of the Contract projection.
	PadRows []string
	// NormedRows names the inputs serving hands as the rows of an RMS
	// norm's output: every row of one root mean square (normed.go). Not
	// part of the Contract projection.
	NormedRows []string
	// Rotary names the query and key a rotary embedding turns in some
	// calls (rope.go). Not part of the Contract projection.
	Rotary *RotarySpec
	// GatedRows names the inputs whose rows are a gated MLP's gate half
	// then its up half, of which the gate alone is shifted in some calls
	// (gates.go). Not part of the Contract projection.
	GatedRows []string
	// Packed names the inputs serving hands as views of packed buffers
	// at one row offset, later rows after them (packed.go). Not part of
	// the Contract projection.
	Packed []string
	// ZeroTail names the inputs whose rows past a sequence's length
	// (seq_lens) serving hands zero: keys gathered through a padded page
	// table from a cache allocated zeroed, never written there (the MSA
	// decode sheet's index_k; zeroTail in pages.go). Not part of the
	// Contract projection.
	ZeroTail []string
	// Chained maps an output to the input that serving hands the slot's
	// next call in that output's memory: the residual stream, whose next
	// layer reads the out_residual this call wrote (the engine's x).
	// Verify's eager replays pass the input so (worker.RunRequest.Chain),
	// Go's values written there; before session 24 every input had memory
	// of its own and a kernel keyed on the relation
	// (ar_rmsnorm_output_feedback_tell) passed. Not part of the Contract
	// projection.
	Chained map[string]string
	// Sinks names the query, key, value and scale of an attention slot
	// whose cases plant attention sinks (sinks.go, sinkvalues.go). Not
	// part of the Contract projection.
	Sinks *SinkSpec
	// SheetSinks names the query, keys and lengths of an MSA decode
	// sheet whose cases plant sink blocks (sheetsinks.go), or the query,
	// keys and prefix length of a prefill sheet whose cases plant a sink
	// key (prefillsinks.go). Not part of the Contract projection.
	SheetSinks *SheetSinkSpec
	// Steps names the lengths and query of a decode slot whose cases
	// take earlier decode steps of a replay (steps.go): the same caches
	// coming back one step longer. Not part of the Contract projection.
	Steps *StepSpec
	// Stream names the inputs that carry a pre-norm model's residual
	// stream, which grows with depth (depth.go): the stack case scales
	// them by its layers' places. Not part of the Contract projection.
	Stream []string

	// fields maps each numeric descriptor field to its dimension
	// expression; extraFields are further context fields the binding
	// supplies (beyond contextFields).
	fields      map[string]string
	extraFields []string
	impl        slotImpl
}

// ScalarRange is the legal range of a float scalar argument: Min and Max
// are scalar expressions (EvalScalar) over the case's dimensions; values
// are drawn log-uniformly between them. Served are further values the
// served models use (an RMSNorm epsilon of 1e-5): verify tries each of
// them exactly, so a kernel wrong at one exact value that a log-uniform
// draw never meets is still graded there.
type ScalarRange struct {
	Min, Max string
	Served   []string
}

// Correctness is a slot's registered grading policy.
type Correctness struct {
	Metric      string               `json:"metric"`                 // allclose, matched_ratio, cosine, topk_overlap
	MinRatio    string               `json:"min_ratio,omitempty"`    // canonical decimal
	OutlierMult string               `json:"outlier_mult,omitempty"` // canonical decimal
	MinCosine   string               `json:"min_cosine,omitempty"`
	NormGuard   string               `json:"norm_guard,omitempty"`
	K           int                  `json:"k,omitempty"`
	MinOverlap  string               `json:"min_overlap,omitempty"`
	Tolerances  map[string]Tolerance `json:"tolerances"` // by torch dtype name
	// SensitivityUnits (canonical decimal, "" for none) lets each
	// element's error reach units × u × its rounding sensitivity, where u
	// is the unit roundoff of the call's dtype (2⁻⁸ bfloat16, 2⁻¹¹
	// float16, 2⁻²⁴ float32) and the sensitivity is computed by the slot's
	// reference beside the result: the relative tolerance applies to
	// max(|expected|, units × u × sensitivity / rtol) (ScaleKey;
	// docs/verify.md, "Rounding sensitivity").
	SensitivityUnits string `json:"sensitivity_units,omitempty"`
}

// Tolerance is an atol/rtol pair as canonical decimal strings.
type Tolerance struct {
	Atol string `json:"atol"`
	Rtol string `json:"rtol"`
}

// f16MaxFinite is float16's largest finite value.
const f16MaxFinite = 65504

// OutlierBound is the largest heavy-tailed outlier of an input:
// OutlierMax (the generator's 96 when 0), in every dtype. A slot whose
// output multiplies two inputs (OutlierProduct) has the product capped
// instead, in float16 (capProducts, gates.go): until v18 each factor
// stopped at ⌊√65504⌋ = 255 there, and a silu_and_mul that clamped its
// float16 inputs at ±255 lost nothing on verify's inputs
// (silu_fp16_clamp255, rt37).
func (s *Spec) OutlierBound() float64 {
	if s.OutlierMax <= 0 {
		return defaultOutlierMax
	}
	return s.OutlierMax
}
