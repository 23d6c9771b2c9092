// Package arena reads arena files (arenas/*.toml): the model, engine and
// workload that the arena runtime serves and that Go times.
//
// An arena file is strict TOML: unknown keys, wrong types and out-of-range
// values are errors that name file:line:col and the field. A checked Arena
// has a canonical identity, canon.Digest(Domain, SchemaVersion, arena), over
// its resolved form (defaults filled in, decimals as canonical decimal
// strings, no floats), so two files that mean the same arena have the same
// digest.
package arena

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	"cacheon/internal/canon"
)

// Identity of an arena configuration.
const (
	Domain        = "cacheon.arena_config"
	SchemaVersion = 1
)

// Model kinds.
const (
	KindLlama   = "llama"   // dense: RMSNorm, RoPE, GQA attention, SwiGLU MLP
	KindMixtral = "mixtral" // as llama, with a top-k routed mixture of SwiGLU experts
	// KindMSA is llama with block-sparse attention: an indexer scores key
	// blocks (the attention.msa_block_score and
	// attention.msa_prefill_block_score slots), the runtime selects each
	// query's top blocks, and attention reads the selected blocks alone.
	KindMSA = "msa"
)

// Arena is a checked arena: everything the runtime needs to build the model
// and everything Go needs to drive and time it.
type Arena struct {
	Name   string   `json:"name"`
	Device string   `json:"device"` // cpu or cuda
	DType  string   `json:"dtype"`  // bfloat16, float16 or float32
	Model  Model    `json:"model"`
	Engine Engine   `json:"engine"`
	Work   Workload `json:"workload"`
	// Workloads are further named workloads on the same model and engine
	// (for example a batch-64 read next to the default batch-1 one).
	Workloads map[string]Workload `json:"workloads,omitempty"`

	// Dir is the directory of the arena file; a relative checkpoint is
	// resolved against it. It is not part of the identity.
	Dir string `json:"-"`
	// WorkloadName is "default" or the name passed to Select.
	WorkloadName string `json:"-"`
}

// Model is the model configuration ([model]).
type Model struct {
	Kind             string        `json:"kind"`
	VocabSize        int           `json:"vocab_size"`
	HiddenSize       int           `json:"hidden_size"`
	NumLayers        int           `json:"num_layers"`
	NumHeads         int           `json:"num_heads"`
	NumKVHeads       int           `json:"num_kv_heads"`
	HeadDim          int           `json:"head_dim"`
	IntermediateSize int           `json:"intermediate_size"` // per expert for mixtral
	RMSNormEps       canon.Decimal `json:"rms_norm_eps"`
	RopeTheta        int64         `json:"rope_theta"`
	MaxPosition      int           `json:"max_position"`
	NumExperts       int           `json:"num_experts"` // 0 for llama
	TopK             int           `json:"top_k"`       // 0 for llama
	WeightsSeed      int64         `json:"weights_seed"`
	// The indexer of an msa model (all 0 for other kinds): IndexHeads
	// query heads of IndexHeadDim (summed before scoring) against one
	// index key per token; keys are scored in blocks of MSABlockSize and
	// every query attends to the MSATopK best blocks, its own block always
	// among them.
	IndexHeads   int `json:"index_heads,omitempty"`
	IndexHeadDim int `json:"index_head_dim,omitempty"`
	MSABlockSize int `json:"msa_block_size,omitempty"`
	MSATopK      int `json:"msa_topk,omitempty"`
	// Checkpoint is a safetensors file with Llama tensor names, as written
	// in the arena file ("" = seeded-random weights).
	Checkpoint string `json:"checkpoint"`
}

// Engine is the serving configuration ([engine]).
type Engine struct {
	PageSize     int   `json:"page_size"`
	MaxBatch     int   `json:"max_batch"`
	KVPages      int   `json:"kv_pages"`
	GraphBuckets []int `json:"graph_buckets"`
	Graphs       bool  `json:"graphs"`
	// PrefillChunk is the most prompt tokens one prefill forward packs;
	// 0 leaves it to the runtime (4096 on CUDA, 512 on the CPU).
	PrefillChunk int `json:"prefill_chunk,omitempty"`
	// TensorParallel is the number of ranks (engine processes) the model
	// is split over, attention by heads and the MLP or experts by
	// intermediate columns; 0 is one rank (an arena that leaves it out,
	// or says 1). See Ranks.
	TensorParallel int `json:"tensor_parallel,omitempty"`
	// MoEPath is how a tensor-parallel mixtral model runs its experts:
	// "" (written "fused" or left out) as one moe.fused_experts_reduce
	// call, MoEPathDeep as validator-owned expert GEMMs with one row per
	// (token, k) pair, then collective.moe_finalize_ar_rmsnorm.
	MoEPath string `json:"moe_path,omitempty"`
}

// The values of engine.moe_path.
const (
	MoEPathFused = "fused"
	MoEPathDeep  = "deep"
)

// MaxTensorParallel bounds engine.tensor_parallel (the GPUs of one host).
const MaxTensorParallel = 8

// Ranks is the number of engine processes that serve the arena (1 when
// it is not tensor parallel).
func (e Engine) Ranks() int { return max(1, e.TensorParallel) }

// Workload is the validator-owned request stream ([workload]).
type Workload struct {
	Requests  int    `json:"requests"`   // requests per wave
	PromptLen [2]int `json:"prompt_len"` // inclusive [min, max]
	OutputLen [2]int `json:"output_len"` // inclusive [min, max]
	Waves     int    `json:"waves"`      // timed waves
	Warmup    int    `json:"warmup"`     // untimed waves before them
	Seed      int64  `json:"seed"`
	// ArrivalEvery is the number of decode steps between two arrivals
	// within a wave (0: every request arrives at once).
	ArrivalEvery int `json:"arrival_every"`
	// TokenRange is the half-open range [lo, hi) prompt token ids are drawn
	// from.
	TokenRange [2]int `json:"token_range"`
}

// DefaultWorkload is the name of the [workload] table.
const DefaultWorkload = "default"

// Digest is the arena's canonical identity. The digest of the arena as
// selected for a workload (Select) is what a product arena identity names
// as its engine settings (product.Arena.Settings, checked by CheckSettings).
func (a *Arena) Digest() (string, error) {
	d, err := canon.Digest(Domain, SchemaVersion, a)
	if err != nil {
		return "", fmt.Errorf("arena %s: digest: %w", a.Name, err)
	}
	return d, nil
}

// WorkloadNames lists the selectable workloads: "default" first, then the
// named ones sorted.
func (a *Arena) WorkloadNames() []string {
	names := make([]string, 0, len(a.Workloads))
	for n := range a.Workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	return append([]string{DefaultWorkload}, names...)
}

// Select returns the arena as run with workload name: its Work is that
// workload and it has no further workloads, so its Digest identifies
// exactly what was run. "" or "default" keeps the [workload] table.
func (a *Arena) Select(name string) (*Arena, error) {
	out := *a
	out.Workloads = nil
	out.Engine.GraphBuckets = slices.Clone(a.Engine.GraphBuckets)
	switch name {
	case "", DefaultWorkload:
		out.WorkloadName = DefaultWorkload
	default:
		w, ok := a.Workloads[name]
		if !ok {
			return nil, fmt.Errorf("arena %s: no workload %q (have %v)", a.Name, name, a.WorkloadNames())
		}
		out.Work = w
		out.WorkloadName = name
	}
	return &out, nil
}

// CheckpointPath is the absolute path of the checkpoint, or "".
func (a *Arena) CheckpointPath() (string, error) {
	if a.Model.Checkpoint == "" {
		return "", nil
	}
	p := a.Model.Checkpoint
	if !filepath.IsAbs(p) {
		p = filepath.Join(a.Dir, p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("arena %s: checkpoint: %w", a.Name, err)
	}
	return abs, nil
}

// RuntimeConfig is what the runtime's load request carries as "arena": the
// top-level fields and the [model] and [engine] sections. The workload stays
// in Go.
type RuntimeConfig struct {
	Name   string `json:"name"`
	Device string `json:"device"`
	DType  string `json:"dtype"`
	Model  Model  `json:"model"`
	Engine Engine `json:"engine"`
}

// Runtime returns the arena's runtime configuration.
func (a *Arena) Runtime() RuntimeConfig {
	e := a.Engine
	e.GraphBuckets = slices.Clone(e.GraphBuckets)
	return RuntimeConfig{Name: a.Name, Device: a.Device, DType: a.DType, Model: a.Model, Engine: e}
}
