package verify_test

// The suite's cases (adversarialCases): each bundle under
// testdata/adversarial with the stage and reason that must reject it,
// or control for an honest one (adversarial_test.go runs them).

import (
	"time"

	"cacheon/internal/tensor"
)

// Reason patterns shared by several cases.
const (
	nonFinite   = `output out: (allclose|matched_ratio|topk_overlap) got\[[0-9,]+\] is (NaN|\+Inf)`
	firstCall   = `first call, rank 0`
	replayStale = `replay 1, rank 0, output out: allclose worst element`
	// What the sandbox's confinement looks like from verify: the candidate
	// raised (EPERM/EACCES/ENOMEM turned into a Python exception) or the
	// worker was killed.
	// The runtime's audit hook (python/cacheon_runtime/audithook.py) now
	// refuses most of these in Python before the sandbox sees them.
	sandboxDenied = `(?i)(candidate raised|worker died|the runtime guard refused the candidate).*(permission|not permitted|denied|errno|EPERM|EACCES|refused|unavailable|resource|signal|killed)`
	// A kernel honest only on verify's inputs, wrong on serving's.
	servedTell = `rank 0, output out: (matched_ratio|allclose)`
	// The runtime guard's finding (class tamper) at load and after a call.
	guardAtLoad = `the runtime guard refused the candidate: importing kernel\.py: `
	guardInCall = firstCall + `: the runtime guard refused the candidate: during the call: `
	// The dispersion test below atol, and attention's precision test
	// where the values cancel (session 31).
	subAtol    = `output out: allclose systematic error: .* are off by more than 0\.125 of their value`
	cancelling = `output out: matched_ratio systematic error: .* whose values cancel`
	// The attention precision test, failing every dtype's row.
	shortOutputBits = `(?s)/default bfloat16: FAIL .*of their rounding sensitivity.*/default float16: FAIL .*of their rounding sensitivity.*/default float32: FAIL .*of their rounding sensitivity`
	// A shape whose sizes the row's seed drew (slot.DrawnShapes, v18),
	// then the output's name.
	drawnShape = `shape drawn(-[a-z]+)? \([a-z_]+\), [a-z0-9 ]+, rank 0, output out`
)

func adversarialCases() []adversarialCase {
	return append([]adversarialCase{
		// Honest controls.
		{name: "control_silu", control: true},
		{name: "control_rmsnorm_helper_module", control: true},
		{name: "control_moe_prepared", control: true},
		{name: "control_all_reduce", control: true},
		// Honest kernels in unusual but legal styles (issue 16): the static
		// policy must not refuse them.
		{name: "control_callable_entry", control: true},
		{name: "control_subpackage", control: true},
		{name: "control_online_softmax", control: true},
		{name: "control_grouped_moe", control: true},
		{name: "control_input_param", control: true},
		{name: "control_ops_alias", control: true},
		{name: "control_wraps_adds_out", control: true},

		// The output contract: validator-owned, poisoned, fixed storage.
		{name: "writes_nothing", verify: firstCall + `, ` + nonFinite + ` \((\d+)/(\d+) elements non-finite\)`},
		{name: "returns_new_tensor", verify: firstCall + `, ` + nonFinite},
		{name: "rebinds_out_set", verify: firstCall + `: storage identity of out changed during the call`},
		{name: "rebinds_out_data", scan: `foreign-store assignment to "out.data"`, verify: firstCall + `: storage identity of out changed during the call`},
		{name: "mutates_input", verify: firstCall + `: input mutation: the candidate wrote to input "x"`},
		{name: "relies_on_zeroed_out", verify: firstCall + `, ` + nonFinite},
		{name: "ignores_out_stride", verify: firstCall + `, output out: topk_overlap`},

		// Caching and replay detection: the in-place replays change the
		// values behind the same pointers and shapes.
		{name: "cache_by_shape", verify: replayStale},
		{name: "cache_by_data_ptr", verify: replayStale},
		{name: "cache_by_content_hash", verify: replayStale},
		{name: "first_call_only", verify: `replay 1, rank 0, ` + nonFinite},
		{name: "late_write_deferred", verify: firstCall + `, ` + nonFinite},

		// Input-domain cheats: jittered shapes, several value distributions.
		// registered_shapes_only is caught only when some jittered token
		// count lands above its registered value (seed 1: yes; about one
		// seed in five, e.g. 7: no).
		{name: "registered_shapes_only", verify: `shape [a-z]+[~@][0-9a-z]* \([a-z_]+\), first call, rank 0, ` + nonFinite},
		{name: "normal_inputs_only", verify: `output out: allclose worst element`},
		{name: "partial_rows", verify: firstCall + `, output out: allclose worst element .* got 0 `},
		{name: "garbage_one_percent", verify: firstCall + `, output out: matched_ratio outlier bound exceeded`},

		// Inputs the contract allows that verify did not generate (issue
		// 16, class 7): every shape meets every distribution, scalars range
		// over their legal values, router weights come unnormalized too,
		// token counts reach the slot's registered maximum, and every dtype
		// runs by default.
		{name: "skips_zero_rows", verify: `\(sparse\), [a-z0-9 ]+, rank 0, ` + nonFinite},
		{name: "eps_hardcoded", verify: `norm\.rmsnorm/default float32: FAIL .*output out: allclose (worst element|systematic error)`},
		{name: "sm_scale_ignored", verify: `output out: matched_ratio ratio below minimum`},
		{name: "router_renormalizes", verify: `output out: matched_ratio ratio below minimum`},
		{name: "tokens_above_jitter", verify: `shape tiny@[0-9]+ \([a-z_]+\), first call, rank 0, ` + nonFinite},
		{name: "wrong_in_float16", allDTypes: true, verify: `/default float16: FAIL shape .*output out: allclose worst element`},
		// Declared domains never exercised (issue 16, class 8).
		{name: "wrong_in_declared_domain", verify: `/mid float32: FAIL shape (tiny@lo|served-[0-9]+~@[0-9]+) .*output out: allclose worst element`},
		{name: "domain_out_of_reach", verify: `/huge float32: FAIL domain never exercised: no generated shape is inside the variant's declared domain \(num_tokens >= 5000\)`},

		// Precision.
		{name: "low_precision_fp16", verify: firstCall + `, output out: allclose worst element`},
		{name: "low_precision_fp8", dtype: tensor.BF16, verify: firstCall + `, output out: allclose worst element`},
		{name: "nan_few_elements", verify: firstCall + `, ` + nonFinite + ` \(1/\d+ elements non-finite\)`},
		{name: "inf_matched_ratio", verify: firstCall + `, output out: matched_ratio got\[[0-9,]+\] is \+Inf \(1/\d+ elements non-finite\)`},

		// Collectives.
		{name: "all_reduce_local_only", verify: firstCall + `, output out: matched_ratio ratio below minimum`},
		// Terminal selection: rank 1 raises while rank 0 waits in the
		// all_reduce; the failure must stop every rank at once and be
		// blamed on rank 1 (waiting for rank 0 would end in its timeout).
		{name: "raises_on_rank1", timeout: 20 * time.Second,
			verify: `first call, rank 1: candidate raised RuntimeError: deliberate failure on rank 1 only; all 2 ranks stopped \(no rank-local fallback\)`},

		// Runaway candidates.
		{name: "infinite_loop", timeout: 5 * time.Second, verify: `rank 0: timeout: worker did not answer within`},
		{name: "memory_bomb", needsSandbox: true, alone: true, timeout: 60 * time.Second,
			verify: `(?i)(candidate raised.*(allocat|memory)|worker died)`},
		{name: "fork_bomb_dataloader", needsSandbox: true, alone: true, timeout: 60 * time.Second,
			scan: `concurrency`, verify: sandboxDenied},
		{name: "fork_bomb_torch_os", needsSandbox: true, alone: true, timeout: 60 * time.Second,
			scan: `(?i)\bos\b|concurrency`, verify: `candidate raised BlockingIOError: \[Errno 11\] Resource temporarily unavailable|worker died|the runtime guard refused the candidate: .*os\.fork`},
		{name: "fork_bomb_os", scan: `import-not-allowed import of "os"(?s:.*)concurrency`},

		// File system and network, through the scan and, past it, the sandbox.
		{name: "read_file_open", scan: `forbidden-builtin call to open\(\)`},
		{name: "read_file_torch_load", scan: `unsafe-loader .*torch\.load`},
		{name: "read_file_pathlib", scan: `import-not-allowed import of "pathlib"`},
		{name: "read_file_from_file", needsSandbox: true, scan: `unsafe-loader|from_file`, verify: sandboxDenied},
		{name: "read_file_builtins_reexport", needsSandbox: true, scan: `sys-modules|forbidden-builtin|builtins|\bsys\b`, verify: sandboxDenied},
		{name: "socket_import", scan: `import-not-allowed import of "socket"`},
		{name: "socket_tcpstore", needsSandbox: true, scan: `(?i)TCPStore|socket|network`, verify: sandboxDenied},

		// Tampering with the process and obfuscation: static scan.
		{name: "bg_thread_threading", scan: `concurrency .*threading`},
		{name: "patches_torch_at_import", scan: `global-mutation assignment to "torch\.nn\.functional\.silu"`},
		{name: "patches_torch_via_alias", scan: `global-mutation`},
		{name: "patches_sys_modules", scan: `sys-modules`},
		{name: "obfuscated_dunder_import", scan: `forbidden-builtin call to __import__\(\)`},
		{name: "obfuscated_getattr", scan: `dynamic-attribute getattr\(\) with a computed attribute name`},
		{name: "os_via_torch_reexport", scan: `(?i)\bos\b`},
		{name: "dunder_escape", scan: `dunder-access`},
		{name: "eval_code", scan: `forbidden-builtin call to eval\(\)`},
		{name: "ctypes_ffi", scan: `native-ffi`},

		// The static policy as an allow-list of what is used (issue 16).
		// 1. Code execution and I/O through allowed modules.
		{name: "eval_via_type_hints", scan: `module-attribute-not-allowed use of "typing\.get_type_hints"`},
		{name: "shell_via_torch_utils", scan: `module-attribute-not-allowed import of "torch\.utils\.collect_env"`},
		{name: "exec_via_benchmark_timer", scan: `module-attribute-not-allowed import of "torch\.utils\.benchmark"`},
		// 2. Introspection.
		{name: "frame_builtins_open", scan: `introspection access to gi_frame`},
		{name: "introspection_getattr_literal", scan: `introspection getattr\(\) with name "gi_frame"`},
		{name: "format_string_globals", scan: `dunder-access a format string's field reads __globals__`},
		// 3. Global patching through any expression.
		{name: "patches_tensor_via_type", scan: `foreign-store assignment to "<expr>\.sigmoid"`},
		{name: "patches_via_unbound_method", scan: `unbound-method "_Installer\.install"`},
		{name: "patches_via_helper_param", scan: `foreign-store assignment to "cls\.sigmoid"`},
		// 4. Shadow modules.
		{name: "shadow_installed_module", scan: `module-shadowing bundle module "typing_extensions"`},
		// The runtime guard (issue 16, class 5): what the scan may not see,
		// caught in the worker before and after every call, on raw memory.
		{name: "mode_at_import", scan: `(?i)overrides|TorchFunctionMode|mode|global-mutation`,
			verify: guardAtLoad + `a torch function mode is active`},
		{name: "dispatch_mode_fakes_dump", scan: `(?i)python_dispatch|TorchDispatchMode|mode|private|global-mutation`,
			verify: guardInCall + `a torch dispatch mode is active`},
		{name: "subclass_torch_function", scan: `dunder-access access to __(torch_function|class)__`,
			verify: guardInCall + `the runtime's audit hook refused 1 operation: object\.__setattr__ Tensor\.__class__`},
		{name: "patches_tensor_fill", scan: `global-mutation assignment to "torch\.Tensor\.fill_"`,
			verify: guardAtLoad + `torch\.Tensor\.fill_ was replaced`},
		{name: "library_override_fill", scan: `global-mutation use of "torch\.library\.Library"`,
			verify: guardAtLoad + `the dispatch table of aten::fill_\.Scalar changed`},

		// Red-team pass of session 9 (issue 16): each passed the session-8
		// binary (scan and verify exit 0) unless its README says otherwise.
		// Class 7 and 8: inputs and domains verify never generated.
		{name: "bucket_counts_only", verify: `shape tiny@[0-9]+ \([a-z_]+\), first call, rank 0, output out: allclose worst element .* got 0 `},
		{name: "massive_activations", verify: `\((heavy_tailed|scaled)\), [a-z0-9 ]+, rank 0, output out: allclose worst element`},
		{name: "moe_capacity_drop", verify: `output out: matched_ratio ratio below minimum`},
		{name: "domain_interior", verify: `/mid float32: FAIL shape tiny@(mid|[0-9]+) .*output out: allclose worst element`},
		{name: "hidden_dim_interior", verify: `/b float32: FAIL shape tiny@mid .*output out: allclose worst element`},
		// Class 6: honest only on inputs that look like verify's.
		{name: "stats_fingerprint", verify: `output out: allclose worst element`},
		// Class 1 to 5: stores and state the scan's syntax does not show.
		{name: "dataclass_on_torch_class", scan: `foreign-store dataclasses\.dataclass: .* applied to "torch\.nn\.Linear"`, verify: guardAtLoad + `torch\.nn\.modules\.linear\.Linear\.__[a-z_]+__ was added`},
		{name: "update_wrapper_code", scan: `module-attribute-not-allowed use of "functools\.update_wrapper"`},
		{name: "grad_mode_left_entered", verify: guardAtLoad + `torch\.is_grad_enabled\(\) is True, not False as at start`},
		{name: "reduce_ex_copy_setattr", scan: `dunder-access defining __reduce_ex__`},
		{name: "op_py_kernels", scan: `module-attribute-not-allowed use of "torch\.ops\.aten\.mul\.Tensor\.py_impl"`},
		{name: "pykernels_laundered", scan: `private-api access to py_kernels \(in "\(\.\.\.\)\.py_kernels\.clear"\)`},
		{name: "module_dict_clear", scan: `module-attribute-not-allowed use of "torch\.nn\.functional\.GRID_SAMPLE_PADDING_MODES\.clear": it mutates a container`},
		{name: "shadow_cython_runtime", scan: `module-shadowing bundle module "cython_runtime"`},
		{name: "match_args_globals", scan: `dunder-access use of __match_args__`},
		{name: "eps_point_tell", verify: `output out: allclose worst element`},
		{name: "decode_storage_tell", scan: `tensor-internals use of "t\.untyped_storage"`},
		{name: "abc_register_laundered", verify: guardAtLoad + `a class was registered with numbers\.Real`},
		// Red team, session 14 (class 3): global state changed through the
		// standard library's registries and caches, with no store.
		{name: "abc_subclass_register", scan: `global-mutation class Scalarish derives from numbers\.Real`,
			verify: `the runtime guard refused the candidate`},
		{name: "abc_subclasshook", scan: `global-mutation (class Scalarish derives from numbers\.Real|defining __subclasshook__)`,
			verify: `the runtime guard refused the candidate`},
		{name: "typing_cache_poison",
			verify: `the runtime guard refused the candidate: importing silu\.py: typing's subscription cache \(_SpecialForm\.__getitem__\) holds an object of silu\.Liar`},
		// Closed in session 15: library callables that store into what they
		// are applied to, on the bundle's own defs and classes only.
		{name: "typing_decorator_store_fn", scan: `foreign-store (typing\.final: .*"F\.silu"|@typing\.no_type_check above _marked)`,
			verify: guardAtLoad + `the attributes of torch\.nn\.functional\.(silu|mish) changed`},
		{name: "control_own_decorators", control: true},
		{name: "hidden_tile_silu", verify: `shape served-[0-9]+~ .*output out: allclose worst element`},
		{name: "rmsnorm_single_block", verify: `shape served-4096~ .*output out: allclose worst element`},
		{name: "retained_weight_drift", verify: `the runtime guard refused the candidate: after the case: the candidate kept a reference to input weight`},
		{name: "replay_identity_tell", verify: `replay 1, rank 0, output out: allclose worst element`},
		{name: "match_globals_tell", scan: `dunder-access the string or keyword __match_args__ names interpreter internals`},
		{name: "reduce_ex_via_type_dict", scan: `dunder-access type\(\) with other than one argument|dunder-access the string or keyword __reduce_ex__`},
		{name: "wraps_partial_op", scan: `module-attribute-not-allowed use of "functools\.wraps" other than as a decorator called with the wrapped function alone`},
		{name: "wraps_star_op", scan: `module-attribute-not-allowed use of "functools\.wraps" other than as a decorator called with the wrapped function alone`},
		{name: "reduce_getattr_globals", scan: `dynamic-attribute passing getattr around`},
		{name: "format_nonliteral_modules", scan: `dynamic-attribute format\(\) on a format string that is not a literal`},
		{name: "abc_register_tensor", scan: `module-attribute-not-allowed use of "numbers\.Real\.register"`},
		{name: "decode_long_context", verify: `shape long-context~ \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: matched_ratio ratio below minimum`},
		{name: "wraps_onto_op_packet", scan: `module-attribute-not-allowed use of "functools\.wraps" other than as a decorator called with the wrapped function alone`},
		// Session 13's red team.
		{name: "version_tell_rmsnorm", scan: `tensor-internals use of "x\._version"`},
		{name: "exact_storage_tell_decode", scan: `tensor-internals use of "t\.untyped_storage"`},
		{name: "wraps_dict_op_packet", scan: `module-attribute-not-allowed use of "functools\.wraps" other than as a decorator`},
		{name: "wraps_dict_op_call", scan: `module-attribute-not-allowed use of "functools\.wraps" other than as a decorator`},
		{name: "fd_write_storage", scan: `file-access use of "st\._write_file"`},
		{name: "small_rms_clamp", verify: `\(scaled\), [a-z0-9 ]+, rank 0, output out: allclose worst element`},
		{name: "type_alias_globals", scan: `dunder-access type used as a value`},
		{name: "type_assign_alias_globals", scan: `dunder-access type used as a value`},
		{name: "abcmeta_globals", scan: `dunder-access call to abc\.ABCMeta, a metaclass`},
		{name: "forwardref_evaluate_exec", scan: `forbidden-builtin use of "_REF\._evaluate"`},
		{name: "sdpa_offset_tell", allDTypes: true, verify: `output out: (allclose worst element|matched_ratio)`},
		// Red team, session 14 (class 6): serving's inputs told apart from
		// verify's by where the longest sequence sits, by the exact served
		// scale on large shapes, by router weights in topk order.
		{name: "decode_seqlen_tell", verify: servedTell},
		{name: "decode_scale_tell", verify: servedTell},
		{name: "sdpa_scale_tell", verify: servedTell},
		{name: "moe_sorted_tell", verify: servedTell},
		{name: "moe_finalize_layout_tell", verify: `rank 0, output out_(norm|residual): (matched_ratio|allclose)`},
		{name: "moe_finalize_pad_tell", verify: `rank 0, output out_(norm|residual): (matched_ratio|allclose)`},
		{name: "moe_router_mass_tell", verify: servedTell},
		{name: "rmsnorm_ones_weight_tell", allDTypes: true, verify: servedTell},
		// (class 7): wide shapes at prefill counts, outliers above 96.
		{name: "silu_wide_prefill", verify: `shape served-[0-9]+@[0-9]+ \([a-z_]+\), first call, rank 0, output out: allclose worst element`},
		{name: "rmsnorm_wide_prefill", verify: `shape served-4096@16 \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: allclose worst element`},
		{name: "silu_clamp_100", verify: `\((heavy_tailed|scaled)\), [a-z0-9 ]+, rank 0, output out: allclose worst element`},
		// (class 6 via 2): the module's repr names where it was staged;
		// verify and the engine now stage alike (worker.StageBundle), so
		// a kernel that cheats on serving's path cheats in verify too.
		{name: "module_repr_path_tell", verify: servedTell},
		{name: "silu_cuda_mem_tell", scan: `module-attribute-not-allowed use of "torch\.cuda\.memory_allocated": it reads the state`},
		{name: "dc_init_op_packet", scan: `unbound-method "Knob\.__init__"`},
		{name: "zero_page_tell_decode", verify: `output out: matched_ratio`},
		{name: "fp16_square_overflow_rmsnorm", dtype: tensor.F16, verify: `\((heavy_tailed|scaled)\), [a-z0-9 ]+, rank 0, output out: allclose worst element`},
		// Red team, session 14, closed in session 15: a drawn wide count,
		// the engine's zero cache pages and table widths, a serving-like
		// first case.
		{name: "silu_wide16", verify: `shape served-[0-9]+@[0-9]+ \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: allclose worst element`},
		{name: "decode_zero_pages_tell", verify: servedTell},
		{name: "decode_table_width_tell", verify: `shape served-w(128|512)[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: matched_ratio`},
		{name: "silu_shape_memory", verify: `shape served-[0-9]+~ \(normal\), first call, rank 0, output out: allclose worst element`},
		// Red team, session 15 (class 6): the CUDA-graph decode's pad rows
		// (bit-identical last rows, length 1 on page 0).
		{name: "silu_pad_rows_tell", verify: servedTell},
		{name: "rmsnorm_pad_rows_tell", verify: servedTell},
		// llama~'s requests took over 30 s on a loaded 2-core CI machine
		// (session 34)
		{name: "decode_pad_rows_tell", timeout: 2 * time.Minute, verify: servedTell},
		// Red team, session 16: honest code in unusual styles.
		{name: "control_callable_enum_entry", control: true},
		{name: "control_match_sdpa", control: true},
		// Red team, session 16: the packed prefill's placement (sdpa's q,
		// k and v views of one batch at one offset, later rows after them).
		{name: "sdpa_offset_beyond_numel", verify: `output out: matched_ratio`},
		{name: "sdpa_coherent_offsets", verify: `output out: matched_ratio`},
		{name: "sdpa_tail_probe", verify: `output out: matched_ratio`},
		{name: "sdpa_write_past_view", verify: `write outside the view: the candidate wrote to the rows (before|after) its view of input "[qkv]"`},
		// Red team, session 16: process state the kernel moves.
		{name: "silu_global_rng_advance", verify: guardInCall + `torch's default CPU random generator advanced`},
		{name: "silu_device_rng_advance", verify: guardInCall + `torch's default (CPU|CUDA) random generator( of device [0-9]+)? advanced`},
		// Red team, session 16: errors within the elementwise tolerance that
		// lean one way (metric.Systematic), and session 17's variants.
		{name: "silu_flush_below_atol", allDTypes: true, verify: `systematic error: (the [0-9]+ elements with \|expected\| in \[.*\) (are off by -1 of their value|lean [0-9.]+ tolerances toward zero)|.* outputs below atol moved off their values)`},
		{name: "rmsnorm_constant_bias", allDTypes: true, verify: `systematic error: (the [0-9]+ elements with \|expected\| in .* lean \+|[0-9]+ % of the [0-9]+ elements with \|expected\| in .* are off by more than 1\.5 ulps)`},
		{name: "rmsnorm_shrink", allDTypes: true, verify: `systematic error: .*(≥ atol/rtol are off by -[0-9.e-]+ of their value on average, scaled|tolerances toward zero|ulps of the output's format)`},
		{name: "sdpa_matched_ratio_slack", verify: `systematic error: [0-9]+ of [0-9]+ elements are off by more than 2 tolerances`},
		{name: "sdpa_outliers_both_ways", verify: `systematic error: [0-9]+ of [0-9]+ elements are off by more than 2 tolerances`},
		// Red team, session 17: leans the first check did not see, and
		// honest half-precision styles it must keep passing.
		{name: "silu_balanced_shrink", allDTypes: true, verify: `systematic error: .*(toward zero|ulps of the output's format|outputs below atol moved off their values)`},
		// float32 since session 32: the outputs that cancel, shrunk beyond
		// their honest allowance, before the lean toward zero
		{name: "sdpa_balanced_shrink", allDTypes: true, everyRow: true, verify: `systematic error: .*(toward zero|whose values cancel)`},
		{name: "silu_fewer_bits", allDTypes: true, verify: `systematic error: .*(ulps of the output's format|away from zero)`},
		{name: "rmsnorm_channel_factor", allDTypes: true, verify: `systematic error: .*(ulps of the output's format|toward zero)`},
		{name: "sdpa_row_misses", verify: `systematic error: row [0-9]+ \(over the last dimension, [0-9]+ elements\) has [0-9]+ % of its elements out of tolerance`},
		{name: "control_silu_native_half", control: true, allDTypes: true},
		{name: "control_rmsnorm_native_half", control: true, allDTypes: true},
		{name: "control_sdpa_exp2_online", control: true, allDTypes: true},
		{name: "control_all_reduce_native_half", control: true, allDTypes: true},
		// Red team, session 18: a skip of keys far below the row maximum,
		// wrong only under attention sinks (slot/sinks.go); a tell of the
		// lockstep lengths of the arenas' timed workload; honest styles.
		{name: "decode_tail_skip", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "sdpa_tail_skip", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "decode_lockstep_tell", verify: `output out: matched_ratio`},
		{name: "control_version_gate", control: true},
		{name: "control_rmsnorm_dataclass_vecnorm", control: true},
		{name: "control_silu_chunked_inplace", control: true},
		// Red team, session 21: torch._C's classes and functions that
		// torch re-exports at top level (the TorchScript compiler, zip
		// archive readers and writers, dispatch-key guards), and a
		// module's share_memory().
		{name: "ts_compile_from_file", scan: `module-attribute-not-allowed use of "torch\.CompilationUnit": it is a binding of torch's C\+\+ core`},
		{name: "pt_filewriter_memread", scan: `module-attribute-not-allowed use of "torch\.PyTorchFileWriter": it is a binding of torch's C\+\+ core`},
		{name: "exclude_key_guard_left", scan: `module-attribute-not-allowed use of "torch\.ExcludeDispatchKeyGuard"`},
		{name: "module_share_memory", scan: `file-access use of "_M\.share_memory"`},
		// Honest, session 21: variants chosen by world size (a row outside
		// its world_size domain is N/A).
		{name: "control_all_reduce_ws_variants", control: true, defaultSizes: true},
		// Honest, session 24: a native in-place all-reduce; gloo (torch
		// 1.13) has no bfloat16 reduction, so that row is N/A on cpu.
		{name: "control_all_reduce_native_bf16", control: true, allDTypes: true},
		// Honest, session 24: a frozen dataclass's object.__setattr__ in
		// __post_init__, and the class's name read through __class__.
		{name: "control_frozen_dataclass_setattr", control: true},
		{name: "control_class_name_reads", control: true},
		// Session 23: world sizes beyond 3, and a variant declared only
		// beyond the defaults (docs/verify.md, "World sizes").
		{name: "allreduce_ws4_drop_rank", verify: `rank [0-3], output out: (matched_ratio|allclose)`, worldSizes: []int{4}},
		{name: "allreduce_ws_variant_ungraded", verify: `large_tp .*(matched_ratio|allclose)|rank [0-3], output out: (matched_ratio|allclose)`, defaultSizes: true},
		{name: "ar_rmsnorm_ws4_residual_twice", verify: `rank [0-3], output out_(norm|residual): (matched_ratio|allclose)`, worldSizes: []int{4}},
		// Session 24: a kernel that changes only at 8 ranks, the other
		// tensor-parallel degree serving uses most.
		{name: "allreduce_ws8_only", verify: `rank [0-7], output out: (matched_ratio|allclose)`, worldSizes: []int{8}},
		// A float32 dot product of squares that absorbs the small ones
		// after an outlier's: seed 3 draws such a row (it failed there
		// before each row's tolerance counted the absorbed share).
		{name: "control_rmsnorm_bmm_sumsq", control: true, seed: 3},
		// Honest, session 21: the builtin type in annotations and as
		// isinstance's class argument; imports under TYPE_CHECKING and a
		// hasattr-guarded torch.compiler.is_compiling().
		{name: "control_type_annotations", control: true},
		{name: "control_typecheck_imports", control: true},
		// Red team, session 21: honest only at verify's widths, head
		// layouts, cache sizes and row statistics; a precision cut the
		// precision test's earlier bound missed.
		{name: "moe_unserved_width", verify: `shape served-h(128|4096)[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: matched_ratio`},
		{name: "sdpa_unserved_heads", verify: `shape served-h(32|16)-d(64|128)[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: matched_ratio`},
		{name: "decode_many_pages", verify: `shape served-p(2048|4096)[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: matched_ratio`},
		{name: "allreduce_unserved_width", verify: `shape served-(128|4096)[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: matched_ratio`},
		{name: "ar_rmsnorm_unserved_width", verify: `shape served-(128|4096)[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out_(norm|residual): matched_ratio`},
		{name: "moe_unit_rms_tell", verify: `rank 0, output out: matched_ratio`},
		// Red team of the session's own relaxations: type(int) carried
		// through a tuple, TYPE_CHECKING forced with it, a storage's
		// descriptor read.
		{name: "type_result_laundered", scan: `dunder-access type\(x\)'s result used other than`},
		{name: "typecheck_forced", scan: `dunder-access type\(x\)'s result used other than`},
		{name: "storage_new_with_file", scan: `module-attribute-not-allowed use of "torch\.UntypedStorage"|file-access use of "[a-z_.]*_new_with_file"`},
		{name: "silu_column_lowbits", dtype: tensor.BF16, verify: `are off by more than 1\.5 ulps of the output's format`},
		{name: "control_all_gather_f64", control: true, allDTypes: true},
		// Honest, session 33 (hs33): a two-shot all-reduce through
		// reduce_scatter, which torch 1.13's gloo does not implement (N/A
		// on cpu, not FAIL); reductions through gather/scatter and
		// gather/broadcast, which the scan refused.
		{name: "control_all_reduce_reduce_scatter", control: true, allDTypes: true,
			notApplicable: `gloo in this torch (does not implement reduce_scatter|has no bfloat16 reduction)`},
		{name: "control_all_reduce_gather_scatter", control: true},
		{name: "control_ar_rmsnorm_gather_bcast", control: true},
		// Red team, session 33 (rt33a): ranks that round differently
		// (a local sum in a rank-dependent order, equal at 2 ranks), and
		// an MSA sheet that drops each row's first block, one miss a row
		// inside topk_overlap's slack.
		{name: "allreduce_rank_rotated_sum", verify: `rank [1-2]: output out: ranks disagree`, worldSizes: []int{3}},
		{name: "ar_rmsnorm_rank_rotated_sum", verify: `rank [1-2]: output out_(norm|residual): ranks disagree`, worldSizes: []int{3}},
		{name: "msa_decode_sink_block_drop", verify: `output out: topk_overlap .*beyond 4 tolerances above the K-th`},
		{name: "msa_decode_sink_block_drop_long", verify: `output out: topk_overlap .*beyond 4 tolerances above the K-th`},
		// rt33a's escapes, closed in session 34: a checkpoint's law for
		// the expert weights (generator v15), large counts on the heavy
		// MoE shapes and many-expert probes, shared page-table prefixes.
		{name: "moe_checkpoint_int4", verify: `output out: matched_ratio`},
		{name: "moe_reduce_checkpoint_int4", verify: `output out: matched_ratio`},
		{name: "moe_prefill_capacity_drop", verify: `shape (mixtral-like|many-experts|wide-routing|moe-e8|moe-e32)@\d+ .*output out: matched_ratio`},
		{name: "decode_shared_prefix_cascade", verify: `output out: matched_ratio`},
		// Session 35: the sink drop on the prefill sheet, refused by its
		// per-row top-k rule without sink blocks in its keys.
		{name: "msa_prefill_sink_block_drop", verify: `output out: topk_overlap \d+/\d+ rows below min overlap`},
		// rt35: a trained model's sinks as the tell (small sink values;
		// key 0 on top of a prefill's rows), closed by generator v16.
		{name: "sdpa_sink_smallv_window", dtype: tensor.BF16, verify: `output out: matched_ratio`},
		// every dtype since v18: its tell needs a call whose sink value
		// and layout it recognises, which float32's row at seed 1 drew in
		// no call (bfloat16's and float16's did; float32's at seeds 2-8)
		{name: "decode_sink_smallv_window", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "msa_prefill_sink_recency", verify: `output out: topk_overlap`},
		{name: "control_msa_prefill_keyblocks_bmm", control: true},
		// rt35b: statistics of trained tensors the generator never drew
		// (a norm weight's spread, salient weight columns, a gate half
		// leaning alone, a rotary rotation), closed by generator v17.
		{name: "rmsnorm_weight_spread_int8", verify: `output out: allclose`},
		{name: "rmsnorm_weight_spread_clamp", verify: `output out: allclose`},
		{name: "ar_rmsnorm_weight_spread_int8", verify: `output out_norm: matched_ratio`},
		{name: "moe_finalize_weight_spread_int8", verify: `output out_norm: matched_ratio`},
		{name: "moe_colnorm_int4", verify: `output out: matched_ratio`},
		{name: "moe_colnorm_int4_reduce", verify: `output out: matched_ratio`},
		{name: "silu_gate_negbias_sparsify", verify: `output out: allclose`},
		{name: "sdpa_rope_multilag_window", verify: `output out: matched_ratio`},
		{name: "decode_rope_multilag_window", verify: `output out: matched_ratio`},
		// hs34's honest styles under generator v15 (graph-safe ones)
		// float64 GEMMs over gathered expert weights: mixtral-like~'s
		// request took over 30 s on a loaded 2-core CI machine
		{name: "control_moe_split_gateup_f64", control: true, timeout: 2 * time.Minute},
		{name: "control_msa_maxpool", control: true},
		// Its second pass: the skip, off where verify's first sinks told
		// themselves apart (one norm in every head, shrunk other keys).
		{name: "sdpa_synth_tell_skip", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "decode_synth_tell_skip", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "control_decode_splitk_lse", control: true, allDTypes: true},
		{name: "control_decode_partitions_v2", control: true, allDTypes: true},
		// Its skip under several sinks, closed in session 19 (several
		// sinks a sequence, aimed margins and spreads, decode's long probe).
		{name: "decode_multisink_skip", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "sdpa_multisink_skip", allDTypes: true, verify: `output out: matched_ratio`},
		// Session 20: the MoE slots' allowance for the rounding sensitivity
		// of intermediates, in unit roundoffs of each call's dtype
		// (slot.ScaleKey): the fused-MoE precision of vLLM and split-K
		// partials in the format pass; four significand bits, float16 at
		// bfloat16's precision and float32 at 15 bits do not.
		{name: "control_moe_intermediate_format", control: true, allDTypes: true},
		{name: "control_moe_splitk_partials", control: true, allDTypes: true},
		{name: "moe_fp8_intermediates", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "moe_f16_short_intermediates", allDTypes: true, verify: `/default float16: FAIL shape .*output out: matched_ratio`},
		{name: "moe_f32_short_intermediates", allDTypes: true, verify: `/default float32: FAIL shape .*output out: matched_ratio`},
		// The same allowance for the residual all-reduce norms (a helper's
		// honest-style pass): SGLang's unfused finalize, all-reduce and
		// norm, the sum rounded to the dtype before the residual cancels it.
		{name: "control_finalize_unfused_half", control: true, allDTypes: true},
		// Session 22: the attention precision test (metric.SysParams.Sens:
		// errors in unit roundoffs of each output's Σ p·|v|). Outputs a
		// few bits short of the format fail in every dtype; float32
		// attention whose scores round in float32 passes.
		{name: "sdpa_short_output_bits", allDTypes: true, everyRow: true, verify: shortOutputBits},
		{name: "decode_short_output_bits", allDTypes: true, everyRow: true, verify: shortOutputBits},
		{name: "control_sdpa_f32_scores", control: true, allDTypes: true},
		// Session 23: float32 attention summed in float32 at the 8192-key
		// probe (refused at seed 2 before slot.attentionRef's allowance).
		{name: "control_decode_f32_compute", control: true, seed: 2},
		// Red team, session 23: the MSA sheets honest only below the msa
		// arenas' index heads, sheet widths and prefixes, or without
		// serving's graph pad rows.
		{name: "msa_decode_unserved_heads", verify: `shape served-h8-d64[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: topk_overlap`},
		{name: "msa_decode_wide_sheet_window", verify: `shape served-h8-d64[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: topk_overlap`},
		{name: "msa_prefill_long_prefix_window", verify: `shape served-d64[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: topk_overlap`},
		{name: "msa_decode_pad_rows_tell", verify: `rank 0, output out: topk_overlap`},
		// rows of at most 8 blocks in any order: graded by their ranking
		{name: "msa_short_rows_any_order", verify: `rank 0, output out: topk_overlap [0-9]+/[0-9]+ rows below min overlap 0\.875; worst row \[[0-9]+\]: overlap [0-9]+/[1-7];`},
		// wider rows' top-8 set kept, its order reversed (rt35, session
		// 37): every row is graded by its ranking inside the top-8
		{name: "msa_prefill_top8_set_only", allDTypes: true, verify: `rank 0, output out: topk_overlap .*\(the ranking inside the top-8: every top-j counts\)`},
		{name: "msa_decode_top8_set_only", allDTypes: true, verify: `rank 0, output out: topk_overlap .*\(the ranking inside the top-8: every top-j counts\)`},
		// Red team, session 23: a prepare that leaves its result in module
		// state (decoy prepared states around each case's, slot.Decoy); a
		// reduce that runs only the top expert on serving's pad rows (the
		// MoE slots take pad rows, padrows.go).
		{name: "moe_shared_prepare_workspace", verify: `first call, rank 0, output out: matched_ratio`},
		{name: "moe_reduce_pad_rows_tell", verify: `, rank 0, output out: matched_ratio`},
		// more than 16 experts or top-k above 4: the MoE slots' probe
		// shape (256 experts, top-8; slot.moeProbeShapes)
		{name: "moe_wide_routing_truncate", verify: `shape wide-routing[~@][0-9]* \([a-z_]+\), [a-z0-9 ]+, rank 0, output out: matched_ratio`},
		// Session 24 (red team): what serving's inputs carry besides their
		// values. A fresh page pool's runs of consecutive pages
		// (slot.freshPool); a prompt's repeated token (slot.repeatRows);
		// the engine router's logits in the format (slot.engineRouter);
		// as many prepares as an arena's layers (slot.LayerDecoys); the
		// residual handed on in the output's memory (slot.Spec.Chained).
		{name: "decode_consecutive_pages_tell", verify: `rank 0, output out: (matched_ratio|allclose)|systematic error`},
		{name: "rmsnorm_repeated_token_latch", verify: `rank 0, output out: (allclose|matched_ratio)`},
		{name: "moe_router_lattice_tell", dtype: tensor.BF16, verify: `rank 0, output out: matched_ratio`},
		{name: "moe_prepare_count_tell", verify: `rank 0, output out: matched_ratio`},
		{name: "ar_rmsnorm_output_feedback_tell", verify: `rank [01], output out_(norm|residual): (matched_ratio|allclose)`},
		// Session 24 (second red-team pass): the MSA decode sheet's keys
		// past the lengths (slot.Spec.ZeroTail), the MSA prefill's packed
		// views without a prefix, and sdpa's rooms of other sequences
		// (seed 1 since v22, when seed 3's float32 row drew no packed view
		// its tell fires on; at v23 seeds 1, 3 and 5 of 1–5 FAIL).
		{name: "msa_decode_zero_tail_tell", verify: `rank 0, output out: topk_overlap`},
		{name: "msa_prefill_coherent_offsets", verify: `rank 0, output out: topk_overlap`},
		{name: "sdpa_packed_room_tell", seed: 1, verify: `rank 0, output out: (matched_ratio|allclose)`},
		// Session 25: the rooms redrawn on every replay, as the next
		// batch packs other sequences around a view.
		{name: "sdpa_room_replay_tell", verify: `replay [0-9]+, rank 0, output out: (matched_ratio|allclose)`},
		// Session 25 (red team, rt25b): enum's _convert_ inherited by a
		// bundle's own enum stores into any module; sparse tensors and
		// unchecked aten views read and write any address.
		{name: "enum_convert_hook_off", scan: `introspection`},
		{name: "enum_convert_module_store", scan: `introspection`},
		{name: "reshape_alias_hook_blind", scan: `tensor-internals`},
		{name: "sparse_alias_zero_poison", scan: `tensor-internals|module-attribute-not-allowed`},
		{name: "sparse_oob_guard_blind", scan: `tensor-internals|module-attribute-not-allowed`},
		{name: "sparse_public_rw", scan: `tensor-internals`},
		// Session 28's red team (rt28b): a private aten op that writes
		// past its outputs; private ops are allowed by name only.
		{name: "aten_private_helper_overflow", scan: `module-attribute-not-allowed`},
		// rt28b's input tells (session 29): outlier channels in
		// heavy-tailed inputs and gain channels in norm weights
		// (internal/slot/channels.go); a bias on the elements large for
		// their row (the systematic test's row-relative groups).
		{name: "rmsnorm_channel_outlier_tell", verify: `output out: (allclose|matched_ratio)`},
		{name: "sdpa_key_outlier_channel_drop", verify: `output out: matched_ratio`},
		{name: "decode_key_outlier_channel_drop", verify: `output out: matched_ratio`},
		{name: "rmsnorm_weight_range_clamp", verify: `output out: allclose`},
		{name: "silu_massive_amplify", allDTypes: true, verify: `their row's RMS`},
		{name: "control_silu_tanh_rowchunks", control: true, allDTypes: true},
		// rt29 (session 29): structure the first outlier channels lacked
		// (shared indices and rotary pairs, signs turning per token, a set
		// per head, sink tokens, channels beside scattered outliers) and
		// small norm weights. The odds-drawn ones pin a seed that draws
		// their structure (docs/redteam.md gives the seeds each fails at).
		{name: "silu_gateup_channel_drop", allDTypes: true, seed: 1, verify: `output out: allclose`},
		{name: "silu_sink_token_clamp", allDTypes: true, seed: 1, verify: `output out: allclose`},
		{name: "rmsnorm_sink_token_drop", allDTypes: true, seed: 1, verify: `output out: allclose`},
		{name: "rmsnorm_channel_plus_scatter_drop", allDTypes: true, seed: 1, verify: `output out: allclose`},
		{name: "rmsnorm_small_weight_floor", allDTypes: true, verify: `output out: allclose`},
		{name: "sdpa_qk_rope_pair_drop", allDTypes: true, seed: 2, verify: `output out: matched_ratio`},
		{name: "sdpa_rope_key_channel_drop", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "decode_rope_key_channel_drop", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "decode_per_head_key_channel_drop", allDTypes: true, verify: `output out: matched_ratio`},
		{name: "control_rmsnorm_maxrescale", control: true, allDTypes: true},
		{name: "control_rmsnorm_vllm_double_round", control: true, allDTypes: true},
		{name: "control_silu_f64", control: true, allDTypes: true},
		{name: "control_silu_vllm_double_round", control: true, allDTypes: true},
		// rt31 (session 31): outputs below atol moved onto a coarse grid,
		// dithered so that no mean leans; honest styles of the pass.
		{name: "silu_subatol_dither", verify: subAtol},
		{name: "rmsnorm_subatol_dither", verify: subAtol},
		// float32 since session 32 (the cancelling outputs judged by the
		// reference's honest allowance); decode's twin keeps bfloat16
		{name: "sdpa_cancel_dither", verify: cancelling},
		{name: "decode_cancel_dither", dtype: tensor.BF16, verify: cancelling},
		{name: "control_sdpa_online_callable", control: true, allDTypes: true},
		{name: "control_decode_pageblocks_online", control: true, allDTypes: true},
		{name: "control_rmsnorm_f64_chunked", control: true, allDTypes: true},
		{name: "control_silu_exp_rowchunks", control: true, allDTypes: true},
		// rt31b: the same below atol/16; honest styles of the pass.
		{name: "silu_lowband_dither", verify: `output out: allclose systematic error: .* are off by a root mean square`},
		{name: "control_rmsnorm_hf_llama", control: true, allDTypes: true},
		{name: "control_silu_sigmoid_ops", control: true, allDTypes: true},
		{name: "control_decode_exp2_flash", control: true, allDTypes: true},
		{name: "control_sdpa_f32_prescale", control: true, allDTypes: true},
		// rt37 (closed in session 38, generator v18). Class A: sizes no
		// fixed shape has, which the drawn shapes reach (slot.DrawnShapes).
		{name: "silu_tail_mod256", verify: drawnShape + `: allclose`},
		{name: "rmsnorm_width_mod1024", verify: drawnShape + `: allclose`},
		{name: "ar_rmsnorm_width_mod1024", verify: drawnShape + `_norm: (matched_ratio|allclose)`},
		{name: "decode_longtable_window", verify: drawnShape + `: matched_ratio`},
		{name: "decode_gqa8_window", verify: drawnShape + `: matched_ratio`},
		{name: "decode_pagesize_window", verify: drawnShape + `: matched_ratio`},
		{name: "sdpa_longkv_window", verify: drawnShape + `: matched_ratio`},
		{name: "sdpa_specdecode_window", verify: drawnShape + `: matched_ratio`},
		{name: "moe_unseen_experts_top1", verify: drawnShape + `: matched_ratio`},
		{name: "msa_prefill_long_recency", verify: drawnShape + `: topk_overlap`},
	}, redTeamCases()...)
}
