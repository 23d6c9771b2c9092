package arena

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"cacheon/internal/canon"
	"cacheon/internal/fielderr"
	"cacheon/internal/tensor"
	"cacheon/internal/tomlpos"
)

// maxFileBytes bounds an arena file.
const maxFileBytes = 1 << 20

// Error is a problem in an arena file, pointing at file:line:col (when the
// position is known) and the field: Path is its dotted path, e.g.
// "model.num_heads", "" for the file. Err is the underlying cause, if any;
// arena messages already say what it is, so it is not printed.
type Error fielderr.Problem

// Error implements error: "t.toml:5:1: model.num_heads: message".
func (e *Error) Error() string {
	p := fielderr.Problem(*e)
	p.Err = nil
	return p.Error()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Load reads and checks the arena file at path.
func Load(path string) (*Arena, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read the arena file", Err: err}
	}
	defer f.Close()
	data, err := readBounded(f, maxFileBytes)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error(), Err: err}
	}
	a, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot resolve the arena directory", Err: err}
	}
	a.Dir = dir
	return a, nil
}

func readBounded(f *os.File, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("the file is larger than %d bytes", limit)
	}
	return data, nil
}

// The raw, decoded form of an arena file. Integers are int64 so that
// overflow is reported as a range error rather than a decode error.
type rawArena struct {
	Name      string                 `toml:"name"`
	Device    string                 `toml:"device"`
	DType     string                 `toml:"dtype"`
	Model     rawModel               `toml:"model"`
	Engine    rawEngine              `toml:"engine"`
	Workload  rawWorkload            `toml:"workload"`
	Workloads map[string]rawWorkload `toml:"workloads"`
}

type rawModel struct {
	Kind             string `toml:"kind"`
	VocabSize        int64  `toml:"vocab_size"`
	HiddenSize       int64  `toml:"hidden_size"`
	NumLayers        int64  `toml:"num_layers"`
	NumHeads         int64  `toml:"num_heads"`
	NumKVHeads       int64  `toml:"num_kv_heads"`
	HeadDim          int64  `toml:"head_dim"`
	IntermediateSize int64  `toml:"intermediate_size"`
	RMSNormEps       string `toml:"rms_norm_eps"`
	RopeTheta        int64  `toml:"rope_theta"`
	MaxPosition      int64  `toml:"max_position"`
	NumExperts       int64  `toml:"num_experts"`
	TopK             int64  `toml:"top_k"`
	WeightsSeed      int64  `toml:"weights_seed"`
	Checkpoint       string `toml:"checkpoint"`
	IndexHeads       int64  `toml:"index_heads"`
	IndexHeadDim     int64  `toml:"index_head_dim"`
	MSABlockSize     int64  `toml:"msa_block_size"`
	MSATopK          int64  `toml:"msa_topk"`
}

type rawEngine struct {
	PageSize       int64   `toml:"page_size"`
	MaxBatch       int64   `toml:"max_batch"`
	KVPages        int64   `toml:"kv_pages"`
	GraphBuckets   []int64 `toml:"graph_buckets"`
	Graphs         *bool   `toml:"graphs"`
	PrefillChunk   *int64  `toml:"prefill_chunk"`
	TensorParallel *int64  `toml:"tensor_parallel"`
	MoEPath        string  `toml:"moe_path"`
}

type rawWorkload struct {
	Requests     int64   `toml:"requests"`
	PromptLen    []int64 `toml:"prompt_len"`
	OutputLen    []int64 `toml:"output_len"`
	Waves        int64   `toml:"waves"`
	Warmup       *int64  `toml:"warmup"`
	Seed         int64   `toml:"seed"`
	ArrivalEvery int64   `toml:"arrival_every"`
	TokenRange   []int64 `toml:"token_range"`
}

// Parse decodes and checks an arena document; file names it in errors.
func Parse(file string, data []byte) (*Arena, error) {
	if len(data) > maxFileBytes {
		return nil, &Error{File: file, Msg: fmt.Sprintf("the file is %d bytes, more than %d", len(data), maxFileBytes)}
	}
	var raw rawArena
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, decodeError(file, err)
	}
	c := &checker{file: file, ix: tomlpos.New(data)}
	a := c.arena(&raw)
	if c.err != nil {
		return nil, c.err
	}
	a.WorkloadName = DefaultWorkload
	return a, nil
}

// decodeError rewrites go-toml's errors with file:line:col and the field.
func decodeError(file string, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		de := &strict.Errors[0]
		line, col := de.Position()
		return &Error{File: file, Line: line, Col: col, Path: strings.Join(de.Key(), "."),
			Msg: "unknown field (the arena schema is closed: see arenas/README.md)"}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		field := strings.Join(de.Key(), ".")
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if rest, ok := strings.CutPrefix(msg, "cannot decode TOML "); ok {
			kind, _, _ := strings.Cut(rest, " into ")
			msg = fmt.Sprintf("wrong type: got a TOML %s, want %s", kind, expectedType(field))
		}
		return &Error{File: file, Line: line, Col: col, Path: field, Msg: msg}
	}
	return &Error{File: file, Msg: "invalid TOML: " + err.Error(), Err: err}
}

func expectedType(field string) string {
	last := field[strings.LastIndexByte(field, '.')+1:]
	switch last {
	case "name", "device", "dtype", "kind", "checkpoint", "moe_path":
		return "a string"
	case "rms_norm_eps":
		return `a decimal string such as "0.00001" (arena files carry no floats)`
	case "graphs":
		return "a boolean"
	case "graph_buckets":
		return "an array of integers"
	case "prompt_len", "output_len", "token_range":
		return "an array of two integers"
	case "model", "engine", "workload":
		return "a table"
	case "workloads":
		return "a table of named workload tables"
	}
	return "an integer"
}

// checker validates the decoded arena, keeping the first error.
type checker struct {
	file string
	ix   *tomlpos.Index
	err  error
}

func (c *checker) fail(field, format string, args ...any) {
	if c.err != nil {
		return
	}
	p, _ := c.ix.Key(field)
	c.err = &Error{File: c.file, Line: p.Line, Col: p.Col, Path: field, Msg: fmt.Sprintf(format, args...)}
}

// required fails when field is not written in the file.
func (c *checker) required(fields ...string) {
	for _, f := range fields {
		if !c.ix.HasKey(f) {
			c.fail(f, "missing (required)")
		}
	}
}

// intIn checks lo <= v <= hi and returns v as an int.
func (c *checker) intIn(field string, v, lo, hi int64) int {
	if v < lo || v > hi {
		c.fail(field, "%d is not in [%d, %d]", v, lo, hi)
	}
	return int(v)
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

func (c *checker) arena(r *rawArena) *Arena {
	c.required("name", "device", "dtype", "model", "engine", "workload")
	a := &Arena{Name: r.Name, Device: r.Device, DType: r.DType}
	if !nameRE.MatchString(r.Name) {
		c.fail("name", "%q is not a name (lowercase letters, digits, '.', '_', '-'; at most 64)", r.Name)
	}
	switch r.Device {
	case "cpu", "cuda":
	default:
		c.fail("device", "%q: want cpu or cuda", r.Device)
	}
	if _, err := tensor.ParseComputeDType(r.DType); err != nil {
		c.fail("dtype", "%v", err)
	}
	if r.DType == "float16" && r.Device == "cpu" {
		c.fail("dtype", "float16 needs device = \"cuda\" (torch's CPU matmuls have no float16 on every supported version)")
	}
	a.Model = c.model(&r.Model)
	a.Engine = c.engine(&r.Engine, a.Device)
	c.tensorParallel(a)
	a.Work = c.workload("workload", &r.Workload, a)
	for name, w := range r.Workloads {
		field := "workloads." + name
		if !nameRE.MatchString(name) || name == DefaultWorkload {
			c.fail(field, "%q is not a workload name (lowercase name, not %q)", name, DefaultWorkload)
		}
		if a.Workloads == nil {
			a.Workloads = map[string]Workload{}
		}
		a.Workloads[name] = c.workload(field, &w, a)
	}
	if c.err == nil {
		c.capacity(a)
	}
	return a
}

const maxDim = 1 << 20

func (c *checker) model(r *rawModel) Model {
	c.required("model.kind", "model.vocab_size", "model.hidden_size", "model.num_layers", "model.num_heads",
		"model.intermediate_size", "model.rms_norm_eps", "model.rope_theta", "model.max_position", "model.weights_seed")
	m := Model{
		Kind:             r.Kind,
		VocabSize:        c.intIn("model.vocab_size", r.VocabSize, 2, 1<<22),
		HiddenSize:       c.intIn("model.hidden_size", r.HiddenSize, 1, maxDim),
		NumLayers:        c.intIn("model.num_layers", r.NumLayers, 1, 1024),
		NumHeads:         c.intIn("model.num_heads", r.NumHeads, 1, 1024),
		IntermediateSize: c.intIn("model.intermediate_size", r.IntermediateSize, 1, maxDim),
		RopeTheta:        int64(c.intIn("model.rope_theta", r.RopeTheta, 1, 1<<40)),
		MaxPosition:      c.intIn("model.max_position", r.MaxPosition, 1, 1<<24),
		WeightsSeed:      int64(c.intIn("model.weights_seed", r.WeightsSeed, 0, math.MaxInt64)),
		Checkpoint:       r.Checkpoint,
	}
	switch r.Kind {
	case KindLlama, KindMixtral, KindMSA:
	default:
		c.fail("model.kind", "%q: want %s, %s or %s", r.Kind, KindLlama, KindMixtral, KindMSA)
	}
	m.NumKVHeads = m.NumHeads
	if c.ix.HasKey("model.num_kv_heads") {
		m.NumKVHeads = c.intIn("model.num_kv_heads", r.NumKVHeads, 1, 1024)
	}
	if m.NumKVHeads > 0 && m.NumHeads%m.NumKVHeads != 0 {
		c.fail("model.num_kv_heads", "%d does not divide num_heads = %d (grouped-query attention needs whole groups)", m.NumKVHeads, m.NumHeads)
	}
	if c.ix.HasKey("model.head_dim") {
		m.HeadDim = c.intIn("model.head_dim", r.HeadDim, 2, 1024)
	} else if m.NumHeads > 0 {
		if m.HiddenSize%m.NumHeads != 0 {
			c.fail("model.num_heads", "%d does not divide hidden_size = %d; set head_dim explicitly", m.NumHeads, m.HiddenSize)
		}
		m.HeadDim = m.HiddenSize / max(1, m.NumHeads)
	}
	if m.HeadDim%2 != 0 {
		c.fail("model.head_dim", "%d is odd (rotary embeddings rotate pairs)", m.HeadDim)
	}
	eps, err := canon.ParseDecimal(r.RMSNormEps)
	if err != nil && c.ix.HasKey("model.rms_norm_eps") {
		c.fail("model.rms_norm_eps", "%q is not a decimal (write it as a string such as \"0.00001\")", r.RMSNormEps)
	}
	if f, _ := eps.Float64(); err == nil && (f <= 0 || f >= 1) {
		c.fail("model.rms_norm_eps", "%s is not in (0, 1)", eps)
	}
	m.RMSNormEps = eps
	switch r.Kind {
	case KindMixtral:
		c.required("model.num_experts", "model.top_k")
		m.NumExperts = c.intIn("model.num_experts", r.NumExperts, 2, 1024)
		m.TopK = c.intIn("model.top_k", r.TopK, 1, 1024)
		if m.TopK > m.NumExperts {
			c.fail("model.top_k", "%d is more than num_experts = %d", m.TopK, m.NumExperts)
		}
	case KindLlama, KindMSA:
		if r.NumExperts != 0 || r.TopK != 0 {
			field := "model.num_experts"
			if r.NumExperts == 0 {
				field = "model.top_k"
			}
			c.fail(field, "a dense %s model has no experts (use kind = %q for a mixture of experts)", r.Kind, KindMixtral)
		}
	}
	c.indexer(r, &m)
	if r.Checkpoint != "" && (strings.ContainsRune(r.Checkpoint, 0) || !strings.HasSuffix(r.Checkpoint, ".safetensors")) {
		c.fail("model.checkpoint", "%q: want the path of a .safetensors file", r.Checkpoint)
	}
	return m
}

// MaxMSATopK is the most blocks an msa arena's queries may select: the K
// at which the MSA slots' topk_overlap grades a sheet's ranking (the slot
// catalog's; TestMaxMSATopK in the engine package keeps them equal).
// Verify grades no cell below a row's K-th, so a sheet exact in its top 8
// that ranked the rest by recency passed every row and would have served
// an engine selecting 16 blocks wrong (rt37's msa_decode_beyond_top8).
const MaxMSATopK = 8

// indexer checks the msa fields: required for kind msa, absent otherwise.
func (c *checker) indexer(r *rawModel, m *Model) {
	fields := []string{"model.index_heads", "model.index_head_dim", "model.msa_block_size", "model.msa_topk"}
	if r.Kind != KindMSA {
		for _, f := range fields {
			if c.ix.HasKey(f) {
				c.fail(f, "only an %s model has an indexer (kind = %q)", KindMSA, KindMSA)
			}
		}
		return
	}
	c.required(fields...)
	m.IndexHeads = c.intIn("model.index_heads", r.IndexHeads, 1, 1024)
	m.IndexHeadDim = c.intIn("model.index_head_dim", r.IndexHeadDim, 2, 1024)
	m.MSABlockSize = c.intIn("model.msa_block_size", r.MSABlockSize, 1, 4096)
	if m.MSATopK = c.intIn("model.msa_topk", r.MSATopK, 1, 4096); m.MSATopK > MaxMSATopK {
		c.fail("model.msa_topk", "%d is more blocks than verify grades a sheet's ranking for (its top %d): "+
			"a kernel exact in its top %d only would pass and serve the rest wrong", m.MSATopK, MaxMSATopK, MaxMSATopK)
	}
	if r.Checkpoint != "" {
		c.fail("model.checkpoint", "an %s model runs on seeded weights only (no checkpoint names its indexer)", KindMSA)
	}
}

func (c *checker) engine(r *rawEngine, device string) Engine {
	c.required("engine.page_size", "engine.max_batch", "engine.kv_pages")
	e := Engine{
		PageSize: c.intIn("engine.page_size", r.PageSize, 1, 4096),
		MaxBatch: c.intIn("engine.max_batch", r.MaxBatch, 1, 4096),
		KVPages:  c.intIn("engine.kv_pages", r.KVPages, 2, 1<<24),
		Graphs:   device == "cuda",
	}
	if r.Graphs != nil {
		e.Graphs = *r.Graphs
	}
	if r.PrefillChunk != nil {
		e.PrefillChunk = c.intIn("engine.prefill_chunk", *r.PrefillChunk, 1, 1<<20)
	}
	if r.TensorParallel != nil {
		e.TensorParallel = c.intIn("engine.tensor_parallel", *r.TensorParallel, 1, MaxTensorParallel)
	}
	switch r.MoEPath {
	case "", MoEPathFused:
	case MoEPathDeep:
		e.MoEPath = MoEPathDeep
	default:
		c.fail("engine.moe_path", "%q: want %q or %q", r.MoEPath, MoEPathFused, MoEPathDeep)
	}
	if e.Graphs && device != "cuda" {
		c.fail("engine.graphs", "CUDA graphs need device = \"cuda\"")
	}
	if r.GraphBuckets == nil {
		for b := 1; b < e.MaxBatch; b *= 2 {
			e.GraphBuckets = append(e.GraphBuckets, b)
		}
		e.GraphBuckets = append(e.GraphBuckets, e.MaxBatch)
		return e
	}
	if len(r.GraphBuckets) == 0 || len(r.GraphBuckets) > 64 {
		c.fail("engine.graph_buckets", "want 1 to 64 batch sizes, got %d", len(r.GraphBuckets))
	}
	prev := int64(0)
	for i, b := range r.GraphBuckets {
		field := fmt.Sprintf("engine.graph_buckets[%d]", i)
		if b <= prev || b > int64(e.MaxBatch) {
			c.fail("engine.graph_buckets", "%s = %d: buckets must increase strictly and stay within max_batch = %d", field, b, e.MaxBatch)
		}
		prev = b
		e.GraphBuckets = append(e.GraphBuckets, int(b))
	}
	return e
}

// tensorParallel checks that the model splits over the engine's ranks:
// whole attention heads (query and key/value) and whole intermediate
// columns on every rank. One rank is stored as 0, so that writing
// tensor_parallel = 1 means the same arena as leaving it out.
func (c *checker) tensorParallel(a *Arena) {
	if a.Engine.TensorParallel == 1 {
		a.Engine.TensorParallel = 0
	}
	tp := a.Engine.TensorParallel
	if a.Engine.MoEPath == MoEPathDeep && (tp <= 1 || a.Model.Kind != KindMixtral) {
		c.fail("engine.moe_path", "%q needs a %s model on at least 2 ranks (tensor_parallel)", MoEPathDeep, KindMixtral)
	}
	if tp <= 1 {
		return
	}
	if a.Model.Kind == KindMSA {
		c.fail("engine.tensor_parallel", "an %s model runs on one rank", KindMSA)
	}
	for _, d := range []struct {
		field string
		n     int
	}{{"model.num_heads", a.Model.NumHeads}, {"model.num_kv_heads", a.Model.NumKVHeads}, {"model.intermediate_size", a.Model.IntermediateSize}} {
		if d.n%tp != 0 {
			c.fail("engine.tensor_parallel", "%d ranks do not divide %s = %d (every rank takes whole heads and an equal share of the MLP)", tp, d.field, d.n)
		}
	}
}

func (c *checker) pair(field string, v []int64, lo, hi int64, inclusive bool) [2]int {
	if len(v) != 2 {
		c.fail(field, "want [min, max], got %d values", len(v))
		return [2]int{}
	}
	if v[0] < lo || v[1] > hi || v[0] > v[1] || (!inclusive && v[0] == v[1]) {
		what := "lo <= hi"
		if !inclusive {
			what = "lo < hi"
		}
		c.fail(field, "[%d, %d] is not a range within [%d, %d] with %s", v[0], v[1], lo, hi, what)
	}
	return [2]int{int(v[0]), int(v[1])}
}

func (c *checker) workload(prefix string, r *rawWorkload, a *Arena) Workload {
	c.required(prefix+".requests", prefix+".prompt_len", prefix+".output_len", prefix+".waves", prefix+".seed")
	w := Workload{
		Requests:     c.intIn(prefix+".requests", r.Requests, 1, 1<<16),
		PromptLen:    c.pair(prefix+".prompt_len", r.PromptLen, 1, 1<<20, true),
		OutputLen:    c.pair(prefix+".output_len", r.OutputLen, 1, 1<<20, true),
		Waves:        c.intIn(prefix+".waves", r.Waves, 1, 1000),
		Warmup:       1,
		Seed:         int64(c.intIn(prefix+".seed", r.Seed, 0, math.MaxInt64)),
		ArrivalEvery: c.intIn(prefix+".arrival_every", r.ArrivalEvery, 0, 1<<20),
		TokenRange:   [2]int{0, a.Model.VocabSize},
	}
	if r.Warmup != nil {
		w.Warmup = c.intIn(prefix+".warmup", *r.Warmup, 0, 100)
	}
	if r.TokenRange != nil {
		w.TokenRange = c.pair(prefix+".token_range", r.TokenRange, 0, int64(a.Model.VocabSize), false)
	}
	return w
}

// capacity checks that every workload fits the model and the KV cache
// without preemption.
func (c *checker) capacity(a *Arena) {
	for _, name := range a.WorkloadNames() {
		w, field := a.Work, "workload"
		if name != DefaultWorkload {
			w, field = a.Workloads[name], "workloads."+name
		}
		seq := w.PromptLen[1] + w.OutputLen[1]
		if seq > a.Model.MaxPosition {
			c.fail(field+".output_len", "prompt_len max + output_len max = %d exceeds model.max_position = %d", seq, a.Model.MaxPosition)
			return
		}
		live := min(w.Requests, a.Engine.MaxBatch)
		// Page 0 is the runtime's scratch page (padding rows of a graph).
		need := live*((seq+a.Engine.PageSize-1)/a.Engine.PageSize) + 1
		if need > a.Engine.KVPages {
			c.fail("engine.kv_pages", "%d pages cannot hold %d concurrent sequences of up to %d tokens (%s needs %d pages of %d, the scratch page included)",
				a.Engine.KVPages, live, seq, field, need, a.Engine.PageSize)
			return
		}
	}
}
