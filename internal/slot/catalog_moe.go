package slot

// The MoE expert slots (moe.fused_experts and its tensor-parallel
// moe.fused_experts_reduce): their arguments, shapes and declared
// reference work. Part of the catalog (catalog.go).

func moeArgs() (args []Arg, prep []Arg) {
	args = []Arg{
		in("x", "M", "H"),
		ints(in("topk_ids", "M", "K"), "int32", "topk_ids", "E"),
		with(in("topk_weights", "M", "K"), func(a *Arg) { a.DType = "float32"; a.Gen = "topk_weights" }),
		prepared(),
		out("out", "M", "H"),
	}
	prep = []Arg{
		with(in("w13", "E", "2*I", "H"), func(a *Arg) { a.Gen = "linear_weight" }),
		with(in("w2", "E", "H", "I"), func(a *Arg) { a.Gen = "linear_weight" }),
	}
	return args, prep
}

func moeShapes() []Shape {
	return []Shape{
		{Name: "tiny", Dims: Dims{"M": 5, "H": 64, "I": 32, "E": 4, "K": 2}, Jitter: []string{"M"}},
		{Name: "mixtral-like", Dims: Dims{"M": 48, "H": 512, "I": 256, "E": 8, "K": 2}, Jitter: []string{"M"}},
		{Name: "many-experts", Dims: Dims{"M": 33, "H": 256, "I": 128, "E": 16, "K": 4}, Jitter: []string{"M"}},
	}
}

// moeProbeShapes are the routing widths of the large MoE models the
// contract allows and no registered or served shape reaches: 256 experts,
// each token routed to 8 (DeepSeek-V3's; Qwen3-MoE's 128 top-8 lies
// between), on small widths. moe_wide_routing_truncate was exact up to 16
// experts and top-4 and kept two experts a token beyond (session 23).
// I = 48 splits across 2, 3 and 4 ranks (moe.fused_experts_reduce).
//
// moe-e8 and moe-e32 are 8 and 32 experts (top-2, top-8) on widths small
// enough that verify's planner gives them its large counts (512 and 1024
// tokens; internal/verify, wideCountShapes): the heavy shapes above get
// only a count just past their registered ones, as their references grow
// with the count times their weights, and a kernel wrong only in batches
// of 64 tokens or more on 8 experts or more (moe_prefill_capacity_drop)
// passed while no case had both. I = 24 splits across 2, 3, 4 and 8 ranks.
func moeProbeShapes() []Shape {
	return []Shape{
		{Name: "wide-routing", Dims: Dims{"M": 40, "H": 64, "I": 48, "E": 256, "K": 8}, Jitter: []string{"M"}},
		{Name: "moe-e8", Dims: Dims{"M": 24, "H": 64, "I": 24, "E": 8, "K": 2}, Jitter: []string{"M"}},
		{Name: "moe-e32", Dims: Dims{"M": 24, "H": 16, "I": 24, "E": 32, "K": 8}, Jitter: []string{"M"}},
	}
}

// moeServedShapes are the MoE arenas' widths: cpu-tiny-moe's hidden and
// intermediate 128, the h200 MoE arenas' hidden 4096 and intermediate
// 14336, each on few small experts (a served layer's weights, 8 experts of
// 4096 × 2·14336, would not fit a verify); moe_unserved_width was honest
// only at verify's hidden widths.
func moeServedShapes() []Shape {
	return []Shape{
		{Name: "served-h128", Dims: Dims{"M": 6, "H": 128, "I": 128, "E": 4, "K": 2}, Jitter: []string{"M"}},
		{Name: "served-h4096", Dims: Dims{"M": 3, "H": 4096, "I": 128, "E": 4, "K": 2}, Jitter: []string{"M"}},
		{Name: "served-i14336", Dims: Dims{"M": 3, "H": 64, "I": 14336, "E": 2, "K": 2}, Jitter: []string{"M"}},
	}
}

// moeWork is the MoE expert slots' reference work per call (Spec.Work):
// each of the M tokens' K experts runs the gate and up GEMMs (2·I×H) and
// the down GEMM (H×I); the reduce variant's ranks together do the same.
const moeWork = "M*K*3*H*I"

func moeFields() map[string]string {
	return map[string]string{"num_tokens": "M", "hidden_dim": "H", "intermediate_dim": "I",
		"num_experts": "E", "top_k": "K"}
}

func fusedExperts() *Spec {
	args, prep := moeArgs()
	return &Spec{
		Name: "moe.fused_experts", Kind: Block, Entry: "fused_experts", Prepare: "prepare",
		Description: "Prepared MoE expert execution: out = Σ_k w_k · (silu(x·gateᵀ) · (x·upᵀ)) · w2ᵀ",
		Reference:   "fused_experts",
		Args:        args, PrepareArgs: prep,
		GraphDynamic: []string{"x", "topk_ids", "topk_weights"},
		Shapes:       moeShapes(),
		ServedShapes: moeServedShapes(),
		ProbeShapes:  moeProbeShapes(),
		Count:        "M", MaxCount: 1024, NormedRows: []string{"x"}, Work: moeWork,
		PadRows:     []string{"x", "topk_ids", "topk_weights"},
		Correctness: moeMatched(),
		fields:      moeFields(),
		extraFields: []string{"quant"},
		impl:        slotImpl{reference: refFusedExperts, sizes: moeSizes, stackThin: moeStackThin, stackKey: moeStackKey},
	}
}

func fusedExpertsReduce() *Spec {
	args, prep := moeArgs()
	args = append(args, group())
	prep[0].Shape = []string{"E", "2*I/WS", "H"}
	prep[1].Shape = []string{"E", "H", "I/WS"}
	prep[0].Shard, prep[1].Shard = "moe_tp", "moe_tp"
	fields := moeFields()
	fields["world_size"] = "WS"
	return &Spec{
		Name: "moe.fused_experts_reduce", Kind: Collective, Entry: "fused_experts_reduce", Prepare: "prepare",
		Description: "Prepared MoE experts on tensor-parallel weight shards plus the owned trailing all-reduce",
		Reference:   "fused_experts_partial+sum_ranks",
		Args:        args, PrepareArgs: prep,
		GraphDynamic: []string{"x", "topk_ids", "topk_weights"},
		Shapes:       moeShapes(),
		ServedShapes: moeServedShapes(),
		ProbeShapes:  moeProbeShapes(),
		Count:        "M", MaxCount: 1024, NormedRows: []string{"x"}, Work: moeWork,
		PadRows:     []string{"x", "topk_ids", "topk_weights"},
		Correctness: moeMatched(),
		fields:      fields,
		extraFields: []string{"quant"},
		impl:        slotImpl{reference: refFusedExpertsReduce, sizes: moeSizes, stackThin: moeStackThin, stackKey: moeStackKey},
	}
}
