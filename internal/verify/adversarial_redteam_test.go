package verify_test

import "cacheon/internal/tensor"

// stackFail is where a stack case's graded call fails (a call label of
// verify's stack case, rank 0).
const stackFail = `stack step [0-9]+ of [0-9]+ after [0-9]+ other layers, rank 0, `

// stackOrDecoy is a failure in a stack case's own calls or in one of its
// graded decoy calls (decoygrade.go).
const stackOrDecoy = `stack step [0-9]+ of [0-9]+([a-z0-9 ]*|, graded decoy call at layer [0-9]+ of [0-9]+ \(another layer's state\)), rank 0, `

// boundTest matches the bounded precision test's findings
// (metric/sumbound.go).
const boundTest = `any order of honest rounding|their honest rounding's scale|every honest kernel gets exactly|a bias kept to some channels`

// redTeamCases are the suite's cases from rt37 on (docs/redteam.md,
// sessions 38 to 40), each closed by a generator version.
func redTeamCases() []adversarialCase {
	return []adversarialCase{
		// Class E: the norm weight redrawn between replays of one case
		// (graph-dynamic), experts alike (slot.upcycle). Class F: float16
		// outliers past 255, their gate·up products capped
		// (slot.capProducts). Class D: rows one rank holds (slot.ownRows).
		{name: "rmsnorm_layer_alternation", verify: `replay [0-9]+, rank 0, output out: allclose`},
		{name: "ar_rmsnorm_layer_alternation", verify: `replay [0-9]+, rank 0, output out_norm: (matched_ratio|allclose)`},
		{name: "moe_upcycled_merge", verify: `rank 0, output out: matched_ratio`},
		{name: "silu_fp16_clamp255", dtype: tensor.F16, verify: `rank 0, output out: allclose`},
		{name: "allreduce_vocab_shard_tell", verify: `rank 0, output out: matched_ratio`},
		// Class D: routing patterns (slot.routing: group-limited, a shared
		// expert), in some calls only: every dtype's row draws its own.
		{name: "moe_group_limited_top1", allDTypes: true, verify: `rank 0, output out: matched_ratio`},
		{name: "moe_shared_expert_drop", allDTypes: true, verify: `rank 0, output out: matched_ratio`},
		// rt37's class B (closed in session 39, generator v19): a third of
		// a collective row's cases hand each rank its subgroup
		// (slot.Partition, Spec.SubgroupCase); at the suite's 2 ranks each
		// is alone, and a sum over the world is wrong on both.
		{name: "allreduce_default_group", verify: `rank [0-9], output out: (matched_ratio|allclose) .* \(the call handed rank [0-9] its subgroup`},
		// rt39's class G, the norm pair (closed in session 39, generator
		// v19): a norm weight seen before coming back with new activations
		// (every layer's norm from a model's second step on); a case's
		// norm weights are now L = 2..4 layers' called in turn
		// (slot.Case.normLayer).
		{name: "rmsnorm_weight_recur", verify: `replay [0-9]+, rank 0, output out: allclose`},
		{name: "ar_rmsnorm_weight_recur", verify: `replay [0-9]+, rank [0-9], output out_norm: (matched_ratio|allclose)`},
		// rt39's classes G and H (closed in session 40, generator v20):
		// a decode cache coming back one step longer (slot.Case.StepBack:
		// earlier steps of half the replays), a prepared state coming
		// back after a deep stack of others (v20's deep case; since v21
		// the stack case, slot.Spec.StackDraw). Each cheats in some calls
		// only: every dtype's row.
		{name: "decode_persist_sink_window", allDTypes: true, verify: `rank 0, output out: matched_ratio`},
		{name: "moe_deep_layer_cycle", allDTypes: true, verify: `(replay [12]|stack step [0-9]+ of [0-9]+ after [0-9]+ other layers), rank 0, output out: matched_ratio`},
		// rt40's closed pair (session 40): a cache seen from its fourth
		// visit on (runs of 2 to 6 earlier steps), a table that gains the
		// page the engine appends (a step's table is padded past its
		// shorter last page).
		{name: "decode_fourth_visit", allDTypes: true, verify: `rank 0, output out: matched_ratio`},
		{name: "decode_table_grow", allDTypes: true, verify: `rank 0, output out: matched_ratio`},
		// rt40's class H' (closed in session 41, generator v21): a state
		// coming back after a served model's depth of others, at a wide
		// layer (the stack case: 16 to 128 layers, each with its own
		// state and activations, slot.Spec.StackDraw, StackShape).
		// Seed 3: v22's draws at seed 1 gave no decode row a stack of 31
		// layers or more whose rows pass 256 positions (the bundle's
		// trigger); at v23 seeds 1, 2 and 3 FAIL 2, 2 and 3 of its 3 rows.
		{name: "decode_layer_depth", allDTypes: true, seed: 3, verify: stackFail + `output out: matched_ratio`},
		{name: "moe_deep_wide", allDTypes: true, verify: stackFail + `output out: matched_ratio`},
		{name: "rmsnorm_weight_cycle5", allDTypes: true, verify: stackFail + `output out: allclose`},
		// rt41's four closed (session 41, generator v21): the case's layer
		// always first in its stack (a kernel honest on the cycle's head
		// only), five or more deep visits, consecutive calls' inputs
		// correlated as one residual stream's (slot.Stack.Own, Steps up
		// to 8, slot.Case.StreamFeed).
		{name: "rmsnorm_head_layer_only", allDTypes: true, verify: stackFail + `output out: allclose`},
		{name: "moe_head_layer_only", allDTypes: true, verify: stackFail + `output out: matched_ratio`},
		{name: "decode_fifth_deep_step", allDTypes: true, verify: stackFail + `output out: matched_ratio`},
		{name: "rmsnorm_residual_stream", allDTypes: true, verify: `stack step [0-9]+ of [0-9]+[a-z0-9 ]*, rank 0, output out: allclose`},
		// Session 42: the graded state was always the second prepared
		// (one decoy, the case's own, the rest); the worker now prepares
		// in the stack's layer order (prepstates.prepare_all).
		{name: "moe_prepare_second_only", verify: `stack step [0-9]+ of [0-9]+[a-z0-9 ]*, rank 0, output out: matched_ratio`},
		// rt43 (session 43): a stored format's exact structure in the
		// weights, closed by generator v22 (slot.storedLattice: bfloat16's
		// grid in float16 and float32, FP8 blocks in every dtype);
		// float32 at seed 1.
		{name: "rmsnorm_bf16_lattice", verify: `rank 0, output out: allclose`},
		{name: "moe_bf16_lattice", verify: `rank 0, output out: matched_ratio`},
		{name: "moe_fp8_block_lattice", verify: `rank 0, output out: matched_ratio`},
		// rt43: a finalizer told verify (states freed when a case ends)
		// from serving (states kept); the scan refuses __del__.
		{name: "moe_state_lifetime", scan: `introspection a finalizer \(__del__\)`},
		// Session 44: norms cheating deep in a growing residual stream,
		// on even growth (rt43) or on uneven growth (rt44), met by
		// generator v23's stack streams (a stream feed is its step's
		// tokens, rows at their sizes, each layer's growth and each
		// row's walk drawn; slot.keepRowSizes, growthOf): only partly,
		// each FAILs 3 and 4 of seeds 1–6 (docs/redteam.md, "Session
		// 44"), so each runs at a seed it FAILs; a stack told by its
		// other layers' outputs not being pre-filled as served calls'
		// are (rt44), closed by the worker poisoning decoy calls'
		// outputs (prepstates.decoy_call).
		// Since generator v24 (session 45) both FAIL every seed of 1–6
		// (8 and 12 of 18 rows): graded decoy calls (slot.DecoySample)
		// meet the stack's stretches of growth, drawn apart (growthOf).
		{name: "rmsnorm_depth_growth", allDTypes: true, seed: 2, verify: stackOrDecoy + `output out: allclose`},
		{name: "rmsnorm_growth_nonuniform", allDTypes: true, verify: stackOrDecoy + `output out: allclose`},
		// rt43's activation lattice, closed by v23's (slot.embedLattice),
		// a float32 running sum's shortfall allowed in the norm's
		// reference; a float16 and float32 cheat.
		{name: "rmsnorm_embed_lattice", verify: `rank 0, output out: allclose`},
		{name: "rmsnorm_prefill_chain", allDTypes: true, verify: stackOrDecoy + `output out: allclose`},
		// Session 45: a norm wrong at one deep layer in six, graded one
		// row in six while only the stack's own layer was; closed by
		// v24's graded decoy calls (decoygrade.go).
		{name: "rmsnorm_layer_subset", allDTypes: true, verify: stackOrDecoy + `output out: allclose`},
		// and one that writes its input there: a graded decoy call's
		// inputs are read back as a graded call's.
		// rt45 (a red-team helper over v24): norms keyed on a weight
		// coming back after more others than a 128-deep stack holds (a
		// model calls its norms twice a layer; at 8 ranks a fused norm's
		// stack had 64 layers at most), met by v24's norm stacks of up
		// to 256 layers at any world size (slot.normMaxDepth).
		{name: "rmsnorm_two_norms_per_layer", allDTypes: true, verify: stackOrDecoy + `output out: allclose`},
		// (v25's re-keyed draws: at seed 1 its bfloat16 and float16
		// rows FAIL, float32 passes; seed 2 float32 only, seed 3
		// bfloat16 only)
		{name: "ar_rmsnorm_tp8_cycle64", allDTypes: true, worldSizes: []int{8}, verify: `stack step [0-9]+ of [0-9]+[^:]*, rank [0-7], output out_norm: (matched_ratio|allclose)`},
		{name: "rmsnorm_layer_subset_inplace", allDTypes: true, verify: `stack step [0-9]+ of [0-9]+[^:]*, rank 0: input mutation: the candidate wrote to input "x"`},
		// rt45's value feedback (session 46): fused norms that cheat
		// only where their residual holds, bit for bit, the out_residual
		// they wrote last, as serving's chained stream hands it; closed
		// by generator v25's stacks, whose decoy calls pass the stream
		// on (slot/chainfeed.go, verify/passon.go).
		{name: "ar_rmsnorm_residual_value_feedback", allDTypes: true, verify: stackOrDecoy + `output out_norm: (matched_ratio|allclose)`},
		{name: "moe_finalize_residual_value_feedback", allDTypes: true, verify: stackOrDecoy + `output out_norm: (matched_ratio|allclose)`},
		// rt46 (a red-team helper over v25's first draft, which passed
		// the stream on only as it was): fused norms that cheat where
		// their residual is what they wrote last moved a little by
		// another sublayer's output, in the same memory (this
		// project's dense tensor-parallel layer) or any (the deep MoE
		// path); closed by the chains that move it (slot.NewPassOn).
		{name: "ar_rmsnorm_dense_mlp_delta", allDTypes: true, verify: stackOrDecoy + `output out_norm: (matched_ratio|allclose)`},
		{name: "moe_finalize_sublayer_delta", allDTypes: true, verify: stackOrDecoy + `output out_norm: (matched_ratio|allclose)`},
		// rt47 (session 47): wrong kernels that ended verify INFRA, a
		// retry, by raising at load an exception the worker could not
		// format (a message whose str subclass raises in __radd__);
		// closed by wire.as_text and by candidateRanReason (any failed
		// load or run request is the candidate's).
		{name: "import_unprintable_message", verify: `import error: _Boom: not ready|the worker failed after candidate code ran`},
		{name: "lookup_unprintable_message", verify: `missing entry: looking up entry 'silu_and_mul': not ready|the worker failed after candidate code ran`},
		{name: "variant_unprintable_half", verify: `silu_and_mul/large float32: FAIL .*(missing entry: looking up entry 'silu_and_mul_large': not ready|the worker failed after candidate code ran)`},
		// rt47e (session 47, closed in session 48): sums below atol
		// snapped onto {−0.9, 0, +0.9}·atol with an unbiased dither;
		// every element inside its tolerance. Closed by the bounded
		// precision test (metric/sumbound.go) against each sum's
		// order-free rounding bound (slot.BoundKey).
		{name: "allreduce_subatol_dither", allDTypes: true, verify: `rank [0-9], output out: matched_ratio .*(` + boundTest + `)`},
		// rt48 (session 48, a red-team helper over the test's first
		// form): noise on the sums below atol/64 (unjudged then), a bias
		// on 4 % of the channels (5 % of a band could be far), and every
		// sum moved by up to 1.4 times its bound (no root mean square
		// judged); and three honest styles, one of them with two more
		// roundings than a ring (judged at three ranks).
		{name: "allreduce_noise_below_atol64", allDTypes: true, verify: `rank [0-9], output out: matched_ratio .*(` + boundTest + `)`},
		{name: "allreduce_channel_bias", allDTypes: true, verify: `rank [0-9], output out: matched_ratio .*(` + boundTest + `)`},
		{name: "allreduce_bound_budget", allDTypes: true, verify: `rank [0-9], output out: matched_ratio .*(` + boundTest + `)`},
		{name: "control_all_reduce_gather_fp32", control: true, allDTypes: true},
		{name: "control_all_reduce_tree_native", control: true, allDTypes: true, worldSizes: []int{4}},
		{name: "control_all_reduce_mean_scaled", control: true, allDTypes: true, worldSizes: []int{3}},
		// session 49: the rounding scale (reference.SumRoundingRMS) and
		// its tests of noise, leans toward zero and gains; rt48b's four
		// kernels, accepted by session 48's yardstick, and two honest
		// conversions to bfloat16 by bits
		{name: "allreduce_rms_noise", allDTypes: true, worldSizes: []int{4}, verify: `rank [0-9], output out: matched_ratio .*(` + boundTest + `)`},
		{name: "allreduce_gain_bias", allDTypes: true, verify: `rank [0-9], output out: matched_ratio .*(` + boundTest + `)`},
		{name: "ar_rmsnorm_residual_noise", allDTypes: true, verify: `rank [0-9], output out_residual: matched_ratio .*(` + boundTest + `)`},
		{name: "moe_finalize_residual_noise", allDTypes: true, verify: `rank [0-9], output out_residual: matched_ratio .*(` + boundTest + `)`},
		{name: "control_all_reduce_bf16_truncate", control: true, allDTypes: true},
		{name: "control_all_reduce_bf16_half_away", control: true, allDTypes: true},
		{name: "control_all_reduce_tree_halving", control: true, allDTypes: true, worldSizes: []int{4}},
		// rt50a (session 50): AttributeError.obj handed the bundle a
		// module the scan could not type (torch.nn.functional), and with
		// it torch's os, sys, builtins and dataclasses' code generator.
		{name: "exception_obj_module_escape", scan: `introspection access to obj`},
		{name: "exception_obj_codegen_entry", scan: `introspection access to obj`},
		{name: "exception_obj_modules_rebind", scan: `introspection access to obj`},
		// rt50b (session 50): a module handed to the bundle's own code
		// through an annotation, an operand, an assert message or a slice
		// bound, and a tensor's storage through its private pickling.
		{name: "annotation_module_tell", scan: `module-alias .* is an annotation`},
		{name: "operand_module_tell", scan: `module-alias .* is an operand`},
		{name: "assert_message_hook_off", scan: `module-alias .* is an assert message`},
		{name: "slice_module_rebind", scan: `module-alias .* is a slice bound`},
		{name: "reduce_ex_storage_tell", scan: `tensor-internals use of "t\._reduce_ex_internal"`},
		// rt50c (session 50): real submodules the scanner's list lacked,
		// and a module re-exported under another name.
		{name: "functional_submodule_tell", scan: `module-alias module "torch.functional"`},
		{name: "fromimport_module_argument", scan: `module-alias module "torch.functional"`},
		{name: "opt_einsum_alias_setter", scan: `module-attribute-not-allowed use of "torch.functional.opt_einsum`},
		// rt50d (session 50): modules bound in a class's scope other
		// than by a direct assignment.
		{name: "class_import_module_tell", scan: `module-alias module "torch.functional" .* stored in an attribute`},
		{name: "class_walrus_module_environ", scan: `module-alias module "torch.functional" .* stored in an attribute`},
		{name: "class_import_file_read", scan: `module-alias module "torch" .* stored in an attribute`},
		// hs50 (session 50): two honest styles the gate failed, at the
		// seed and world size where they did.
		{name: "control_ar_rmsnorm_vllm_rounded", control: true, dtype: tensor.BF16, worldSizes: []int{8}, seed: 2},
		{name: "control_sdpa_f32_probs_rounded", control: true, seed: 16},
		// hs50b (session 50): eight expert outputs added in float16.
		{name: "control_moe_f16_running_sum", control: true, dtype: tensor.F16, seed: 2},
		// rt51a (session 51): names the interpreter binds where the
		// scanner did not look: class-private names (mangled) and a
		// package's submodules in its __init__.py.
		{name: "mangle_tell", scan: `sys-modules use of "torch.sys.modules"`},
		{name: "mangle_attr_tell", scan: `sys-modules use of "torch.sys.modules"`},
		{name: "mangle_hook_off", scan: `module-escape use of "torch.inspect.stack"`},
		{name: "sub_tell", scan: `sys-modules use of "torch.sys.modules"`},
		{name: "sub_cross_tell", scan: `sys-modules use of "torch.sys.modules"`},
		{name: "sub_exec_spawn", scan: `module-escape use of "torch.inspect.stack"`},
		// rt51b (session 51): the fused norms' out_norm a few bits short,
		// which no precision test measured.
		{name: "arnorm_short_bits", allDTypes: true, verify: `output out_norm: matched_ratio systematic error: [0-9]+ % of the [0-9]+ elements .* rounding sensitivity`},
		{name: "finalize_short_bits", allDTypes: true, verify: `output out_norm: matched_ratio systematic error: [0-9]+ % of the [0-9]+ elements .* rounding sensitivity`},
		// rt52: the identity of a scalar argument. The engine handed its
		// model's own float to every call of every slot, a worker a new one
		// per case: `eps is last_eps` with another shape, or one object in
		// two slots, happened only in serving. One object per value and
		// slot in both (argplan.Scalars): the tells now fire in verify.
		{name: "scalar_eps_tell", verify: `output out: `},
		{name: "scalar_sdpa_tell", allDTypes: true, verify: `output out: `},
		{name: "scalar_msa_prefill_tell", verify: `output out: `},
		{name: "scalar_arnorm_tell", verify: `output out_norm: `},
		{name: "scalar_cross_slot_tell", verify: `output out_norm: `},
		// hs52: a kept exception's traceback held the case's tensors (an
		// honest fallback memo was refused as retention); the retention
		// check now clears the finished frames a kept traceback holds,
		// never a generator's, and a closure's cells stay.
		{name: "control_fallback_error_memo", control: true, allDTypes: true},
		{name: "retained_in_generator", verify: `the candidate kept a reference to input weight`},
		{name: "retained_beside_traceback", verify: `the candidate kept a reference to input weight`},
		// rt52's lead, session 53: a clock tells verify's calls, one at a
		// time, from an engine's layers, microseconds apart. Inline
		// assembly stays legal when its text is one literal with no clock
		// or counter register.
		{name: "clock_event_elapsed", scan: `clock access to elapsed_time`},
		{name: "clock_triton_globaltimer", scan: `clock access to globaltimer`},
		{name: "clock_asm_built_text", scan: `clock inline assembly whose text the scanner cannot read`},
		{name: "clock_asm_literal_register", scan: `clock inline assembly reads %clock64`},
		{name: "control_triton_inline_asm", control: true, allDTypes: true},
		// rt53: clocks past the first rule (LLVM's alternative syntax,
		// Triton's builtin and extern routes, a store into the JIT's
		// source, the autotuner's timings, launch and placement registers).
		{name: "clock_asm_llvm_variant", scan: `clock inline assembly uses LLVM's alternative syntax`},
		{name: "clock_triton_builtin_asm", scan: `triton\.language\.core\.builtin`},
		{name: "clock_triton_extern_intrinsic", scan: `triton\.language\.core\.extern`},
		{name: "clock_jit_src_store", scan: `foreign-store assignment to "_k\._src"`},
		{name: "clock_autotune_timings", scan: `clock access to configs_timings`},
		{name: "clock_asm_gridid", scan: `clock inline assembly reads %gridid`},
		{name: "clock_triton_smid", scan: `clock access to smid`},
		// hs53: the unbound-method rule matched methods by name alone.
		{name: "control_method_name_collision", control: true},
	}
}
