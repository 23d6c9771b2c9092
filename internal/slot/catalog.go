package slot

// Registered tolerances (DESIGN.md §5): bf16 atol=rtol=2e-2, f16 1e-2,
// f32 1e-5; the metric decides how they are applied.
func standardTolerances() map[string]Tolerance {
	return map[string]Tolerance{
		"bfloat16": {Atol: "0.02", Rtol: "0.02"},
		"float16":  {Atol: "0.01", Rtol: "0.01"},
		"float32":  {Atol: "0.00001", Rtol: "0.00001"},
	}
}

// reductionTolerances are for slots whose outputs reduce over hundreds of
// terms (attention over keys, expert GEMMs, cross-rank sums of those): an
// honest float32 kernel's summation order alone moves results by ~1e-5
// relative on the scaled (×6) distribution, so float32 gets 1e-4. The
// matched_ratio outlier bound still caps every element at 10× that.
func reductionTolerances() map[string]Tolerance {
	t := standardTolerances()
	t["float32"] = Tolerance{Atol: "0.0001", Rtol: "0.0001"}
	return t
}

func allclose() Correctness {
	return Correctness{Metric: "allclose", Tolerances: standardTolerances()}
}

func matched(minRatio string) Correctness {
	return Correctness{Metric: "matched_ratio", MinRatio: minRatio, OutlierMult: "10", Tolerances: reductionTolerances()}
}

// moeMatched is matched for the MoE expert slots, with each element's
// error allowed up to 2.5 unit roundoffs of the call's dtype times its
// rounding sensitivity where that exceeds the relative tolerance of
// |expected|. vLLM's fused MoE stores both GEMMs' outputs in the format; on
// heavy-tailed tokens (outliers up to 96) the first GEMM's outputs run
// large, their terms in the down projection cancel, and that style's
// bfloat16 errors reached 28 tolerances of the small results. In unit
// roundoffs (not a share of rtol) the allowance holds each format to its
// own precision: a share of rtol let float16 calls run at bfloat16's
// precision and float32 ones at 15 significand bits (docs/verify.md,
// "Rounding sensitivity").
func moeMatched() Correctness {
	c := matched("0.97")
	c.SensitivityUnits = "2.5"
	return c
}

// residualMatched is matched for the residual all-reduce norms, with an
// allowance of one unit roundoff for the rounding sensitivity of the
// all-reduced sum (reference.ResidualNormSensitivity): NCCL's all-reduce of
// a bfloat16 tensor returns it in bfloat16, and vLLM's and SGLang's
// unfused paths add the residual to that; where the residual cancels the
// sum, that honest rounding was up to 22 tolerances of the result. One
// rounding of the sum is off by at most one unit roundoff of it, so one
// unit (not the MoE slots' 2.5 for their many roundings): with 2.5 a sum
// kept at 6 significand bits in bfloat16 passed every seed, with one unit
// it fails 5 of 6 (CPU, seeds 1–6), the honest unfused paths none.
func residualMatched() Correctness {
	c := matched("0.99")
	c.SensitivityUnits = "1"
	return c
}

// sumMatched is matched for collective.all_reduce, with an allowance of
// one unit roundoff of each sum's order-free rounding bound
// (reference.SumOrderBound: (k−2)·Σ|x_r| + |sum| over k ranks): an honest
// ring rounds a partial sum at every hop, and where the ranks' outliers
// cancel (heavy-tailed values up to 4096) gloo's own float16 all-reduce
// was off by 20 and 30 tolerances of the result at four and eight ranks
// (control_all_reduce_native_bf16), a ring summing in the format at three
// to eight (control_all_reduce_native_half; session 48). Over two ranks
// the bound is |sum|, one rounding of the result, inside rtol in every
// format, so the allowance widens nothing there.
func sumMatched() Correctness {
	c := matched("0.99")
	c.SensitivityUnits = "1"
	return c
}

func topk(k int, minOverlap string) Correctness {
	return Correctness{Metric: "topk_overlap", K: k, MinOverlap: minOverlap, Tolerances: standardTolerances()}
}

// msaDecodeTopK is the MSA decode sheet's top-8 rule with an allowance of
// 2.5 unit roundoffs of each cell's rounding sensitivity, Σ_h |q_h·k|
// (reference.MSABlockScoreSensitivity): an honest kernel that rounds each
// head's score to the dtype before summing the heads, or sums the heads'
// queries in the dtype, erred by 7–8 tolerances of a cell whose heads
// cancelled, and misranked it (session 37, bfloat16). Where the
// sensitivity is at most twice |cell| the allowance stays within the
// relative tolerance of every dtype (2.5·u·2 is 0.0098 in bfloat16
// against an rtol of 0.02), so only cancelling cells gain slack.
func msaDecodeTopK() Correctness {
	c := topk(8, "0.875")
	c.SensitivityUnits = "2.5"
	return c
}

// epsRange is the legal range of a normalization epsilon: the models'
// values (1e-5, 1e-6) lie inside it. 1e-6 is the registered value; 1e-5,
// every shipped arena's (the engine passes the arena's rms_norm_eps), is
// the served value: half of a row's cases pass it exactly, on shapes the
// seed picks (CaseParams.ScalarPoint).
func epsRange() ScalarRange {
	return ScalarRange{Min: "0.00000001", Max: "0.01", Served: []string{"0.00001"}}
}

// smScaleRange is the legal range of an attention softmax scale: around
// the registered 1/sqrt(head_dim), as models scale it differently. The
// engine always passes head_dim ** -0.5 (the msa indexer's own head
// dimension for its scale), so that is the served value: half of a row's
// cases pass it exactly, large shapes included (a kernel honest only when
// the scale was not exactly 1/sqrt(D), or the shape small, passed:
// sdpa_scale_tell, decode_scale_tell).
func smScaleRange() ScalarRange {
	return ScalarRange{Min: "0.5*rsqrt(D)", Max: "1.5*rsqrt(D)", Served: []string{"rsqrt(D)"}}
}

// contextFields are supplied by every live binding.
func contextFields() []string {
	return []string{"architecture", "device", "dtype", "graph_mode", "model", "phase"}
}

func in(name string, shape ...string) Arg {
	return Arg{Name: name, Kind: ArgInput, DType: "vdt", Shape: shape, Gen: "values"}
}

func out(name string, shape ...string) Arg {
	return Arg{Name: name, Kind: ArgOutput, DType: "vdt", Shape: shape}
}

func scalar(name, typ, value string) Arg {
	return Arg{Name: name, Kind: ArgScalar, Scalar: typ, Value: value}
}

func with(a Arg, f func(*Arg)) Arg { f(&a); return a }

func perRank(a Arg) Arg { a.PerRank = true; return a }

func group() Arg { return Arg{Name: "group", Kind: ArgGroup} }

func prepared() Arg { return Arg{Name: "prepared", Kind: ArgPrepared} }

func ints(a Arg, dtype, gen, rng string) Arg {
	a.DType, a.Gen, a.Range = dtype, gen, rng
	return a
}

// NewCatalog builds the 11 registered slots. It is the executable truth of
// the slot table in DESIGN.md §5.
func NewCatalog() (*Catalog, error) {
	return newCatalog(
		siluAndMul(), rmsnorm(), sdpa(), decode(), msaBlockScore(), msaPrefillBlockScore(),
		fusedExperts(), fusedExpertsReduce(), allReduce(), arResidualRMSNorm(), moeFinalizeARRMSNorm(),
	)
}

func siluAndMul() *Spec {
	return &Spec{
		Name: "activation.silu_and_mul", Kind: Op, Entry: "silu_and_mul",
		Description:  "Gated MLP activation product: out = silu(x[:, :d]) * x[:, d:]",
		Reference:    "silu_and_mul",
		Args:         []Arg{in("x", "N", "2*D"), out("out", "N", "D")},
		GraphDynamic: []string{"x"},
		Shapes: []Shape{
			{Name: "tiny", Dims: Dims{"N": 7, "D": 96}, Jitter: []string{"N"}},
			{Name: "mlp", Dims: Dims{"N": 64, "D": 1024}, Jitter: []string{"N"}},
			{Name: "wide", Dims: Dims{"N": 33, "D": 2816}, Jitter: []string{"N"}},
		},
		// the MLP widths of the shipped arenas (per rank): cpu-tiny 256,
		// its two-rank split 128, h200-dense-1b 8192, h200-dense-8b 14336,
		// its two-rank split 7168
		ServedShapes: []Shape{
			{Name: "served-128", Dims: Dims{"N": 6, "D": 128}, Jitter: []string{"N"}},
			{Name: "served-256", Dims: Dims{"N": 6, "D": 256}, Jitter: []string{"N"}},
			{Name: "served-7168", Dims: Dims{"N": 3, "D": 7168}, Jitter: []string{"N"}},
			{Name: "served-8192", Dims: Dims{"N": 3, "D": 8192}, Jitter: []string{"N"}},
			{Name: "served-14336", Dims: Dims{"N": 2, "D": 14336}, Jitter: []string{"N"}},
		},
		Count: "N", MaxCount: 4096,
		OutlierMax: largeOutlierMax, OutlierProduct: true, PadRows: []string{"x"}, GatedRows: []string{"x"},
		Correctness: allclose(),
		fields:      map[string]string{"num_tokens": "N", "hidden_dim": "D", "last_dim": "2*D"},
		impl:        slotImpl{reference: refSiluAndMul, sizes: widthSizes("N", "D", 1)},
	}
}

// largeOutlierMax is the largest heavy-tailed input (Spec.OutlierMax) of
// the slots whose outputs depend on each input element through an
// elementwise or per-row function: the activation (silu_and_mul), the
// norms (rmsnorm, ar_residual_rmsnorm, moe_finalize_ar_rmsnorm) and the
// plain cross-rank sum (all_reduce). Served hidden states carry massive
// activations in the hundreds and thousands: a norm that squares in
// float16 overflows above 256 (fp16_square_overflow_rmsnorm), an
// activation that clamps its inputs at ±100 passed the generator's 96
// (silu_clamp_100). An honest kernel's error there stays relative to
// each element, so the catalog's tolerances hold; silu_and_mul's gate·up
// product is capped in float16 (Spec.OutlierProduct). The slots that
// contract inputs through dot products keep the generator's 96: in the
// attention slots an outlier dominates a row's scores and honest float32
// summation orders exceed the matched-ratio outlier bound (scales up to
// ×12 were tried, docs/verify.md); the MSA score sheets' top-k is decided
// by the same dot products; the MoE experts carry an outlier through two
// projections and a gate·up product, which an honest float16 kernel
// overflows.
const largeOutlierMax = 4096

func rmsnorm() *Spec {
	return &Spec{
		Name: "norm.rmsnorm", Kind: Op, Entry: "rmsnorm",
		OutlierMax:  largeOutlierMax,
		Description: "RMS normalization (residual addition stays outside): out = x * rsqrt(mean(x^2) + eps) * weight",
		Reference:   "rmsnorm",
		Args: []Arg{
			in("x", "N", "H"),
			with(in("weight", "H"), func(a *Arg) { a.Gen = "norm_weight" }),
			out("out", "N", "H"),
			scalar("eps", "float", "0.000001"),
		},
		// The weight too (v18): serving calls one shape with each layer's
		// norm weight in turn, and a norm that left the weight out when it
		// changed between two calls of one shape passed while verify's
		// replays kept it (rmsnorm_layer_alternation, rt37).
		GraphDynamic: []string{"x", "weight"},
		Stream:       []string{"x"},
		Shapes: []Shape{
			{Name: "tiny", Dims: Dims{"N": 5, "H": 64}, Jitter: []string{"N"}},
			{Name: "hidden", Dims: Dims{"N": 48, "H": 2048}, Jitter: []string{"N"}},
			{Name: "odd", Dims: Dims{"N": 17, "H": 1000}, Jitter: []string{"N"}},
		},
		// the hidden sizes of the shipped arenas: cpu-tiny 128,
		// h200-dense-8b and h200-moe 4096 (h200-dense-1b's 2048 is
		// registered)
		ServedShapes: []Shape{
			{Name: "served-128", Dims: Dims{"N": 6, "H": 128}, Jitter: []string{"N"}},
			{Name: "served-4096", Dims: Dims{"N": 4, "H": 4096}, Jitter: []string{"N"}},
		},
		Count: "N", MaxCount: 4096, PadRows: []string{"x"},
		ScalarRanges: map[string]ScalarRange{"eps": epsRange()},
		Correctness:  allclose(),
		fields:       map[string]string{"num_tokens": "N", "hidden_dim": "H", "last_dim": "H"},
		impl:         slotImpl{reference: refRMSNorm, sizes: widthSizes("N", "H", 2)},
	}
}

func sdpa() *Spec {
	return &Spec{
		Name: "attention.sdpa", Kind: Block, Entry: "attention",
		Description: "Scaled dot-product attention core, GQA/MQA, bottom-right causal mask",
		Reference:   "sdpa",
		Args: []Arg{
			in("q", "T", "HQ", "D"),
			in("k", "T+P", "HKV", "D"),
			in("v", "T+P", "HKV", "D"),
			out("out", "T", "HQ", "D"),
			scalar("sm_scale", "float", "rsqrt(D)"),
			scalar("causal", "bool", "CAUSAL"),
		},
		GraphDynamic: []string{"q", "k", "v"},
		Packed:       []string{"q", "k", "v"},
		Sinks:        &SinkSpec{Query: "q", Key: "k", Value: "v", Scale: "sm_scale"},
		Rotary:       &RotarySpec{Query: "q", Key: "k"},
		Shapes: []Shape{
			{Name: "decode-like", Dims: Dims{"T": 1, "P": 36, "HQ": 8, "HKV": 8, "D": 64, "CAUSAL": 1}, Jitter: []string{"P"}},
			{Name: "prefill-gqa", Dims: Dims{"T": 64, "P": 0, "HQ": 8, "HKV": 2, "D": 64, "CAUSAL": 1}, Jitter: []string{"T"}},
			{Name: "chunked-mqa", Dims: Dims{"T": 40, "P": 56, "HQ": 16, "HKV": 1, "D": 128, "CAUSAL": 1}, Jitter: []string{"T", "P"}},
			{Name: "bidirectional", Dims: Dims{"T": 24, "P": 8, "HQ": 4, "HKV": 4, "D": 64, "CAUSAL": 0}, Jitter: []string{"T"}},
		},
		// A long prefix (4096 keys): under an attention sink a tail of
		// thousands of keys, each far below the row's maximum, carries a
		// real share of the mass; a kernel that skips such keys is wrong
		// only behind a long prefix (sdpa_tail_skip, sinks.go).
		ProbeShapes: []Shape{
			{Name: "long-prefix", Dims: Dims{"T": 16, "P": 4080, "HQ": 8, "HKV": 2, "D": 64, "CAUSAL": 1}, Jitter: []string{"T"}},
		},
		// the shipped arenas' heads per rank with their head dimension:
		// the cpu arenas 4/2 of 32 (2/1 at two ranks), h200-dense-1b and
		// h200-msa 32/8 of 64, the 8b and MoE arenas 32/8 of 128 (16/4 at
		// two ranks); a kernel honest only at verify's head counts was
		// wrong wherever it is served (sdpa_unserved_heads)
		ServedShapes: []Shape{
			{Name: "served-d32", Dims: Dims{"T": 12, "P": 0, "HQ": 4, "HKV": 2, "D": 32, "CAUSAL": 1}, Jitter: []string{"T"}},
			{Name: "served-h2-d32", Dims: Dims{"T": 12, "P": 0, "HQ": 2, "HKV": 1, "D": 32, "CAUSAL": 1}, Jitter: []string{"T"}},
			{Name: "served-h32-d64", Dims: Dims{"T": 12, "P": 116, "HQ": 32, "HKV": 8, "D": 64, "CAUSAL": 1}, Jitter: []string{"T"}},
			{Name: "served-h32-d128", Dims: Dims{"T": 8, "P": 120, "HQ": 32, "HKV": 8, "D": 128, "CAUSAL": 1}, Jitter: []string{"T"}},
			{Name: "served-h16-d128", Dims: Dims{"T": 8, "P": 120, "HQ": 16, "HKV": 4, "D": 128, "CAUSAL": 1}, Jitter: []string{"T"}},
		},
		Count: "T", MaxCount: 512,
		ScalarRanges: map[string]ScalarRange{"sm_scale": smScaleRange()},
		Correctness:  matched("0.99"),
		fields: map[string]string{"num_tokens": "T", "seq_len": "T+P", "num_heads": "HQ",
			"num_kv_heads": "HKV", "head_dim": "D"},
		impl: slotImpl{reference: refSDPA, sizes: sdpaSizes},
	}
}

func decode() *Spec {
	return &Spec{
		Name: "attention.decode", Kind: Block, Entry: "attention_decode",
		Description: "Paged decode attention: each query attends its first seq_lens[b] cached positions through its block table",
		Reference:   "paged_decode",
		Args: []Arg{
			in("q", "B", "HQ", "D"),
			in("k_cache", "PAGES", "PS", "HKV", "D"),
			in("v_cache", "PAGES", "PS", "HKV", "D"),
			ints(in("block_table", "B", "MAXP"), "int32", "block_table", "PAGES"),
			ints(in("seq_lens", "B"), "int32", "seq_lens", "MAXP*PS"),
			scalar("sm_scale", "float", "rsqrt(D)"),
			out("out", "B", "HQ", "D"),
		},
		GraphDynamic: []string{"q", "k_cache", "v_cache", "block_table", "seq_lens"},
		Shapes: []Shape{
			{Name: "small", Dims: Dims{"B": 3, "HQ": 8, "HKV": 2, "D": 64, "PS": 16, "MAXP": 6, "PAGES": 24}, Jitter: []string{"B"}},
			{Name: "llama", Dims: Dims{"B": 8, "HQ": 32, "HKV": 8, "D": 128, "PS": 16, "MAXP": 32, "PAGES": 300}, Jitter: []string{"B"}},
			{Name: "mqa-page1", Dims: Dims{"B": 5, "HQ": 4, "HKV": 1, "D": 64, "PS": 1, "MAXP": 70, "PAGES": 400}, Jitter: []string{"B"}},
			// A long context (4096 positions): a kernel that splits or
			// windows long sequences is wrong only beyond the 512 of the
			// shapes above (issue 16, class 7: decode_long_context).
			{Name: "long-context", Dims: Dims{"B": 2, "HQ": 8, "HKV": 2, "D": 64, "PS": 16, "MAXP": 256, "PAGES": 600}, Jitter: []string{"B"}},
		},
		// the cpu arenas' head dimension, and the arenas' table widths:
		// the engine's block_table has max_pages_per_seq columns,
		// ceil(min(max_position, 8192)/page_size): 16 on the cpu arenas,
		// 512 on the h200 dense and MoE ones (h200-dense-1b's heads of
		// 64), 128 on h200-msa. A table's width is its columns, not its
		// cache: 24 pages hold them all (pages repeat), so the widths
		// cost little (decode_table_width_tell: verify's tables were at
		// most 256 wide, a kernel honest only there passed). The heads
		// per rank with their head dimension as sdpa's, and the caches'
		// page counts (kv_pages: 40 and 64 on the cpu arenas, on the heads'
		// shapes, 2048 and 4096 on the h200 ones; decode_many_pages was honest only in
		// caches of at most 1000 pages), each on small heads.
		ServedShapes: []Shape{
			{Name: "served-d32", Dims: Dims{"B": 3, "HQ": 4, "HKV": 2, "D": 32, "PS": 16, "MAXP": 16, "PAGES": 24}, Jitter: []string{"B"}},
			{Name: "served-h2-d32", Dims: Dims{"B": 3, "HQ": 2, "HKV": 1, "D": 32, "PS": 16, "MAXP": 16, "PAGES": 64}, Jitter: []string{"B"}},
			{Name: "served-h32-d64", Dims: Dims{"B": 3, "HQ": 32, "HKV": 8, "D": 64, "PS": 16, "MAXP": 16, "PAGES": 40}, Jitter: []string{"B"}},
			{Name: "served-h16-d128", Dims: Dims{"B": 3, "HQ": 16, "HKV": 4, "D": 128, "PS": 16, "MAXP": 16, "PAGES": 40}, Jitter: []string{"B"}},
			{Name: "served-p2048", Dims: Dims{"B": 3, "HQ": 4, "HKV": 1, "D": 32, "PS": 16, "MAXP": 16, "PAGES": 2048}, Jitter: []string{"B"}},
			{Name: "served-p4096", Dims: Dims{"B": 3, "HQ": 4, "HKV": 1, "D": 32, "PS": 16, "MAXP": 16, "PAGES": 4096}, Jitter: []string{"B"}},
			{Name: "served-w128", Dims: Dims{"B": 3, "HQ": 8, "HKV": 2, "D": 64, "PS": 16, "MAXP": 128, "PAGES": 24}, Jitter: []string{"B"}},
			{Name: "served-w512", Dims: Dims{"B": 3, "HQ": 8, "HKV": 2, "D": 64, "PS": 16, "MAXP": 512, "PAGES": 24}, Jitter: []string{"B"}},
		},
		// Sequences of up to 8192 positions under attention sinks: the
		// tail a skip drops is largest behind the longest sequences, and a
		// skip of keys far below the row's top that fired only under
		// several sinks (sinks.go) met too few long sequences in the
		// shapes above.
		ProbeShapes: []Shape{
			{Name: "long-probe", Dims: Dims{"B": 2, "HQ": 8, "HKV": 2, "D": 64, "PS": 16, "MAXP": 512, "PAGES": 520}, Jitter: []string{"B"}},
		},
		Count: "B", MaxCount: 256, PadRows: []string{"q"},
		Sinks:        &SinkSpec{Query: "q", Key: "k_cache", Value: "v_cache", Scale: "sm_scale"},
		Steps:        &StepSpec{Lens: "seq_lens", Query: "q"},
		Rotary:       &RotarySpec{Query: "q", Key: "k_cache"},
		ScalarRanges: map[string]ScalarRange{"sm_scale": smScaleRange()},
		Correctness:  matched("0.99"),
		fields: map[string]string{"batch_size": "B", "num_heads": "HQ", "num_kv_heads": "HKV",
			"head_dim": "D", "page_size": "PS", "seq_len": "MAXP*PS"},
		impl: slotImpl{reference: refDecode, sizes: decodeSizes, stackWork: decodeStackWork, stackThin: decodeStackThin, stackKey: decodeStackKey},
	}
}

func msaBlockScore() *Spec {
	return &Spec{
		Name: "attention.msa_block_score", Kind: Block, Entry: "msa_block_score",
		Description: "MSA decode block-score sheet: per block, max over visible keys of (sum of heads of q)·k; validator owns top-k",
		Reference:   "msa_block_score",
		Args: []Arg{
			in("q", "B", "HQ", "D"),
			in("index_k", "B", "S", "1", "D"),
			ints(in("seq_lens", "B"), "int32", "seq_lens", "S"),
			scalar("block_size", "int", "BS"),
			with(out("out", "B", "cdiv(S,BS)"), func(a *Arg) { a.DType = "float32" }),
		},
		GraphDynamic: []string{"q", "index_k", "seq_lens"},
		Shapes: []Shape{
			{Name: "small", Dims: Dims{"B": 2, "HQ": 4, "S": 256, "D": 64, "BS": 16}, Jitter: []string{"B"}},
			{Name: "ragged", Dims: Dims{"B": 4, "HQ": 16, "S": 1000, "D": 128, "BS": 64}, Jitter: []string{"B"}},
		},
		// the msa arenas' indexers whole: cpu-tiny-msa's (2 heads of 32,
		// blocks of 16) and h200-msa's (8 heads of 64, blocks of 64), each
		// over its widest sheet, the engine's table width (max_position
		// in pages: 16 and 32 blocks; session 23)
		ServedShapes: []Shape{
			{Name: "served-d32", Dims: Dims{"B": 2, "HQ": 2, "S": 256, "D": 32, "BS": 16}, Jitter: []string{"B"}},
			{Name: "served-h8-d64", Dims: Dims{"B": 3, "HQ": 8, "S": 2048, "D": 64, "BS": 64}, Jitter: []string{"B"}},
		},
		// A long sheet (47 blocks) outside the serving case: a row's first
		// case is its serving case, often served-h8-d64, the only shape
		// above 16 blocks, which takes no sink blocks (sheetsinks.go), and
		// a sparse attention that dropped block 0 only on rows of more
		// than 16 blocks (msa_decode_sink_block_drop_long) passed such
		// seeds.
		ProbeShapes: []Shape{
			{Name: "long-sheet", Dims: Dims{"B": 4, "HQ": 2, "S": 3000, "D": 32, "BS": 64}, Jitter: []string{"B"}},
		},
		Count: "B", MaxCount: 64, PadRows: []string{"q", "index_k"},
		ZeroTail:    []string{"index_k"},
		SheetSinks:  &SheetSinkSpec{Query: "q", Key: "index_k", Lens: "seq_lens"},
		Rotary:      &RotarySpec{Query: "q", Key: "index_k", Lens: "seq_lens"},
		Steps:       &StepSpec{Lens: "seq_lens", Query: "q"},
		Correctness: msaDecodeTopK(),
		fields: map[string]string{"batch_size": "B", "num_heads": "HQ", "seq_len": "S",
			"head_dim": "D", "block_size": "BS"},
		impl: slotImpl{reference: refMSABlockScore, sizes: msaDecodeSizes, stackWork: sheetStackWork, stackThin: sheetStackThin, stackKey: sheetStackKey},
	}
}

func msaPrefillBlockScore() *Spec {
	return &Spec{
		Name: "attention.msa_prefill_block_score", Kind: Block, Entry: "msa_prefill_block_score",
		Description: "MSA prefill causal block-max of scale·q·kᵀ into a strided f32 sheet; invisible cells -inf",
		Reference:   "msa_prefill_block_score",
		Args: []Arg{
			in("q", "T", "D"),
			in("index_k", "PREFIX+T", "D"),
			scalar("prefix_len", "int", "PREFIX"),
			scalar("scale", "float", "rsqrt(D)"),
			scalar("block_size", "int", "BS"),
			with(out("out", "T", "cdiv(PREFIX+T,BS)"), func(a *Arg) { a.DType = "float32"; a.RowPad = 8 }),
		},
		GraphDynamic: []string{"q", "index_k"},
		Shapes: []Shape{
			{Name: "small", Dims: Dims{"T": 16, "PREFIX": 40, "D": 64, "BS": 16}, Jitter: []string{"T", "PREFIX"}},
			{Name: "long-prefix", Dims: Dims{"T": 48, "PREFIX": 700, "D": 128, "BS": 64}, Jitter: []string{"T", "PREFIX"}},
		},
		// the msa arenas' indexers: cpu-tiny-msa's, h200-msa's, each at a
		// chunk ending at the arena's max_position (a chunked prefill's
		// prefix reaches it; session 23)
		ServedShapes: []Shape{
			{Name: "served-d32", Dims: Dims{"T": 16, "PREFIX": 240, "D": 32, "BS": 16}, Jitter: []string{"T", "PREFIX"}},
			{Name: "served-d64", Dims: Dims{"T": 16, "PREFIX": 2032, "D": 64, "BS": 64}, Jitter: []string{"T", "PREFIX"}},
			// a prompt's first chunk, no prefix: every fresh prefill
			// (PREFIX was never 0 before session 24)
			{Name: "fresh-d32", Dims: Dims{"T": 200, "PREFIX": 0, "D": 32, "BS": 16}, Jitter: []string{"T"}},
			{Name: "fresh-d64", Dims: Dims{"T": 400, "PREFIX": 0, "D": 64, "BS": 64}, Jitter: []string{"T"}},
			{Name: "fresh-short-d32", Dims: Dims{"T": 100, "PREFIX": 0, "D": 32, "BS": 16}, Jitter: []string{"T"}},
			{Name: "fresh-short-d64", Dims: Dims{"T": 240, "PREFIX": 0, "D": 64, "BS": 64}, Jitter: []string{"T"}},
		},
		// The engine packs a prefill batch's prompts: q and index_k are
		// views at one row offset of packed buffers, later prompts after
		// them (msa.Sparse.prefill); msa_prefill_coherent_offsets cheated
		// when both sat at one non-zero offset with no prefix.
		Packed:     []string{"q", "index_k"},
		SheetSinks: &SheetSinkSpec{Query: "q", Key: "index_k", Prefix: "prefix_len"},
		Rotary:     &RotarySpec{Query: "q", Key: "index_k"},
		Count:      "T", MaxCount: 512,
		ScalarRanges: map[string]ScalarRange{"scale": smScaleRange()},
		Correctness:  topk(8, "0.9"),
		fields:       map[string]string{"num_tokens": "T", "seq_len": "PREFIX+T", "head_dim": "D", "block_size": "BS"},
		impl:         slotImpl{reference: refMSAPrefill, sizes: msaPrefillSizes},
	}
}

func allReduce() *Spec {
	return &Spec{
		Name: "collective.all_reduce", Kind: Collective, Entry: "all_reduce",
		Description:  "Cross-rank sum into a validator-owned output",
		Reference:    "sum_ranks",
		Args:         []Arg{perRank(in("x", "M", "H")), out("out", "M", "H"), group()},
		GraphDynamic: []string{"x"},
		Shapes: []Shape{
			{Name: "tiny", Dims: Dims{"M": 4, "H": 64}, Jitter: []string{"M"}},
			{Name: "hidden", Dims: Dims{"M": 96, "H": 2048}, Jitter: []string{"M"}},
		},
		// the shipped tensor-parallel arenas' hidden sizes: the cpu ones'
		// 128, h200x2's 4096 (allreduce_unserved_width skipped the
		// communication at any other width than verify's)
		ServedShapes: []Shape{
			{Name: "served-128", Dims: Dims{"M": 6, "H": 128}, Jitter: []string{"M"}},
			{Name: "served-4096", Dims: Dims{"M": 3, "H": 4096}, Jitter: []string{"M"}},
		},
		Count: "M", MaxCount: 4096, PadRows: []string{"x"},
		OutlierMax:  largeOutlierMax,
		Correctness: sumMatched(),
		fields:      map[string]string{"num_tokens": "M", "hidden_dim": "H", "last_dim": "H", "world_size": "WS"},
		impl:        slotImpl{reference: refAllReduce, sizes: widthSizes("M", "H", 1)},
	}
}

func arResidualRMSNorm() *Spec {
	return &Spec{
		Name: "collective.ar_residual_rmsnorm", Kind: Collective, Entry: "ar_residual_rmsnorm",
		OutlierMax:  largeOutlierMax,
		Description: "Fused all-reduce, residual add and RMSNorm: out_residual = Σx + residual, out_norm = rmsnorm(out_residual)",
		Reference:   "sum_ranks+residual+rmsnorm",
		Args: []Arg{
			perRank(in("x", "M", "H")),
			in("residual", "M", "H"),
			with(in("weight", "H"), func(a *Arg) { a.Gen = "norm_weight" }),
			scalar("eps", "float", "0.000001"),
			out("out_norm", "M", "H"),
			out("out_residual", "M", "H"),
			group(),
		},
		GraphDynamic: []string{"x", "residual", "weight"}, // weight: as rmsnorm's
		Stream:       []string{"residual"},
		Shapes: []Shape{
			{Name: "tiny", Dims: Dims{"M": 4, "H": 64}, Jitter: []string{"M"}},
			{Name: "hidden", Dims: Dims{"M": 64, "H": 2048}, Jitter: []string{"M"}},
		},
		// the shipped tensor-parallel arenas' hidden sizes: the cpu ones'
		// 128, h200x2's 4096 (allreduce_unserved_width skipped the
		// communication at any other width than verify's)
		ServedShapes: []Shape{
			{Name: "served-128", Dims: Dims{"M": 6, "H": 128}, Jitter: []string{"M"}},
			{Name: "served-4096", Dims: Dims{"M": 3, "H": 4096}, Jitter: []string{"M"}},
		},
		Count: "M", MaxCount: 4096, PadRows: []string{"x", "residual"},
		Chained:      map[string]string{"out_residual": "residual"},
		ScalarRanges: map[string]ScalarRange{"eps": epsRange()},
		Correctness:  residualMatched(),
		fields:       map[string]string{"num_tokens": "M", "hidden_dim": "H", "world_size": "WS"},
		impl:         slotImpl{reference: refARResidualRMSNorm, sizes: widthSizes("M", "H", 2)},
	}
}

func moeFinalizeARRMSNorm() *Spec {
	return &Spec{
		Name: "collective.moe_finalize_ar_rmsnorm", Kind: Collective, Entry: "moe_finalize_ar_rmsnorm",
		OutlierMax:  largeOutlierMax,
		Description: "Deep MoE finalize (Σ_k scales·gemm_out[row_map]), head-trim, all-reduce, residual and RMSNorm",
		Reference:   "moe_finalize+sum_ranks+residual+rmsnorm",
		Args: []Arg{
			perRank(in("gemm_out", "(T+PAD)*K", "H")),
			ints(in("row_map", "K*(T+PAD)"), "int32", "row_map", "(T+PAD)*K"),
			with(in("scales", "T+PAD", "K"), func(a *Arg) { a.DType = "float32"; a.Gen = "topk_weights" }),
			in("residual", "T", "H"),
			with(in("weight", "H"), func(a *Arg) { a.Gen = "norm_weight" }),
			scalar("eps", "float", "0.000001"),
			out("out_norm", "T", "H"),
			out("out_residual", "T", "H"),
			group(),
		},
		GraphDynamic: []string{"gemm_out", "row_map", "scales", "residual", "weight"}, // weight: as rmsnorm's
		Stream:       []string{"residual"},
		Shapes: []Shape{
			{Name: "tiny", Dims: Dims{"T": 5, "PAD": 3, "K": 2, "H": 64}, Jitter: []string{"T"}},
			{Name: "deep", Dims: Dims{"T": 40, "PAD": 8, "K": 4, "H": 1024}, Jitter: []string{"T"}},
		},
		// cpu-tiny-moe-deep-tp2's hidden size
		ServedShapes: []Shape{
			{Name: "served-128", Dims: Dims{"T": 5, "PAD": 3, "K": 2, "H": 128}, Jitter: []string{"T"}},
		},
		Count: "T", MaxCount: 1024, PadRows: []string{"residual"},
		Chained:      map[string]string{"out_residual": "residual"},
		ServingPad:   &ServingPad{Dim: "PAD", Of: "T", Multiple: 8},
		ScalarRanges: map[string]ScalarRange{"eps": epsRange()},
		Correctness:  residualMatched(),
		fields:       map[string]string{"num_tokens": "T", "hidden_dim": "H", "top_k": "K", "world_size": "WS"},
		impl:         slotImpl{reference: refMoEFinalize, sizes: finalizeSizes},
	}
}
