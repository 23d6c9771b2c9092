package scan

import (
	"path"
	"strings"
)

// The attribute allow-list: what a bundle may use of each allowed module.
//
// An import allow-list alone is not a policy: torch, typing, functools and
// the other allowed modules reach code evaluation, unpickling, files,
// shells and native loaders through their attributes (torch.utils,
// torch.jit.load, typing.get_type_hints, ...). So every dotted name a
// bundle uses that is rooted at an allowed module (an import, an attribute
// chain, a getattr with a literal name, an alias, followed through the
// bundle's re-exports) must match this list.
//
// Each allowed module has a table of entries. An entry's pattern is a
// dotted path whose components may hold shell globs ("torch.set_*"); the
// most specific entry matching a prefix of the name decides (more
// components first, then more literal characters; a deny wins a tie):
//
//   - attrTree allows the path and everything below it, except the real
//     submodules of the installed package below it (the parse script lists
//     them from the file system), which need entries of their own: a torch
//     that adds torch.newthing does not get it allowed by "torch.*";
//   - attrModules is attrTree with the submodules included;
//   - attrExact allows exactly the path: a module whose attributes are
//     listed one by one (torch.cuda, torch.distributed);
//   - attrDeny refuses the path and everything below it, with a reason.
//
// Private components ("_x") are refused unless the deciding entry names
// them ("torch._scaled_*"); dunder components end the match (the dunder
// rules judge them). A module the policy allows without a table here (one
// an operator adds with --allow-import) is allowed whole.

type attrKind int

const (
	attrTree attrKind = iota
	attrModules
	attrExact
	attrDeny
)

// attrEntry is one entry of a module's table.
type attrEntry struct {
	pattern string
	kind    attrKind
	why     string
}

// Reasons of the deny entries.
const (
	whyCodegen    = "it compiles and loads generated code (inductor writes files and starts compile workers; TorchScript and FX load programs); write the kernel in torch or triton"
	whyUtils      = "torch.utils holds data loaders and pipes (processes), benchmark timers (which exec their statements), environment collectors (which start shells), cpp_extension, model_zoo and tensorboard; a kernel needs none of it (activation checkpointing included: kernels run without autograd)"
	whyLoader     = "it loads programs, weights or native code from files or the network"
	whyFiles      = "it reads or writes files"
	whyProcesses  = "it starts processes or threads"
	whySetter     = "process-wide settings belong to the validator"
	whyAlias      = "it is a module re-exported under another name; import the module by its own name"
	whyRNG        = "the global random generators are the validator's; create a torch.Generator of your own"
	whyDevice     = "device, allocator, stream and graph management is the engine's"
	whyHooks      = "it installs process-wide hooks, dispatch modes or operator registrations"
	whyEval       = "it evaluates strings (annotations) as code"
	whyMutate     = "it stores into its argument like an assignment, which the scanner cannot attribute"
	whyDynamic    = "reflective attribute access hides what is touched; use plain attribute access"
	whyCopyAttrs  = "it copies attributes named by strings from one object onto another (assigned=(\"__code__\",) rewrites a torch function); use @functools.wraps(f) as a decorator"
	whyRegister   = "it registers a virtual subclass process-wide (numbers.Real.register(torch.Tensor) makes every tensor a number to every isinstance check)"
	whyContainer  = "it mutates a container the module owns, which the engine shares"
	whyGlobal     = "it switches SDPA backends process-wide for the duration; call torch.nn.functional.scaled_dot_product_attention and let it choose"
	whyRawMemory  = "sparse tensors, unchecked views and buffer views address memory through indices nothing checks against their storage (any address of the worker); compute on dense tensors and their checked views"
	whyStorage    = "a storage is a tensor's raw memory with descriptor I/O and sharing; a kernel computes on tensors"
	whyDeviceCode = "it builds device code from text the scanner cannot read (inline assembly, intrinsics by name); use triton.language and its libdevice"
	whyClock      = "it reads a clock or where a block runs, which tells verify's calls from served ones"
	whyState      = "it reads the state of the process or the device (memory in use, other processes, clocks), which differs between grading and serving: a kernel could tell the two apart"
)

// attrTables returns the attribute allow-list of every module of the
// default policy, keyed by top-level module.
func attrTables() map[string][]attrEntry {
	t := map[string][]attrEntry{
		"torch":       torchTable(),
		"triton":      tritonTable(),
		"math":        {{pattern: "math.*"}},
		"itertools":   {{pattern: "itertools.*"}},
		"numbers":     {{pattern: "numbers.*"}, {pattern: "numbers.*.register", kind: attrDeny, why: whyRegister}},
		"__future__":  {{pattern: "__future__.*"}},
		"dataclasses": names("dataclasses", "dataclass", "field", "fields", "asdict", "astuple", "replace", "is_dataclass", "InitVar", "KW_ONLY", "MISSING", "Field", "FrozenInstanceError"),
		// Context managers a kernel writes for itself (hs25); not
		// ExitStack, whose pop_all leaves what it entered entered, nor
		// redirect_* and chdir, which change process state.
		"contextlib": names("contextlib", "contextmanager", "nullcontext", "suppress"),
		"enum":       names("enum", "Enum", "IntEnum", "Flag", "IntFlag", "StrEnum", "ReprEnum", "auto", "unique", "EnumMeta", "EnumType"),
		"abc": append(names("abc", "ABC", "ABCMeta", "abstractmethod", "abstractproperty", "abstractclassmethod", "abstractstaticmethod"),
			attrEntry{pattern: "abc.*.register", kind: attrDeny, why: whyRegister}),
		"collections": append(names("collections", "namedtuple", "deque", "defaultdict", "OrderedDict", "Counter", "ChainMap"),
			attrEntry{pattern: "collections.abc", kind: attrModules},
			attrEntry{pattern: "collections.abc.*.register", kind: attrDeny, why: whyRegister}),
		"typing": append(names("typing", "Any", "Callable", "Optional", "Union", "Tuple", "List", "Dict",
			"Set", "FrozenSet", "Sequence", "MutableSequence", "Mapping", "MutableMapping", "Iterable",
			"Iterator", "Generator", "Type", "TypeVar", "Generic", "Protocol", "Literal", "Final", "ClassVar",
			"NamedTuple", "TypedDict", "TYPE_CHECKING", "cast", "overload", "final", "override", "NoReturn",
			"Never", "Annotated", "ParamSpec", "Concatenate", "TypeAlias", "Self", "Hashable", "Sized",
			"Collection", "Container", "Reversible", "AbstractSet", "KeysView", "ItemsView", "ValuesView",
			"Deque", "DefaultDict", "OrderedDict", "Counter", "SupportsInt", "SupportsFloat", "SupportsIndex",
			"TypeGuard", "Unpack", "TypeVarTuple", "Required", "NotRequired", "LiteralString", "assert_never",
			"assert_type", "get_origin", "get_args", "runtime_checkable", "no_type_check", "dataclass_transform"),
			attrEntry{pattern: "typing.get_type_hints", kind: attrDeny, why: whyEval},
			attrEntry{pattern: "typing.ForwardRef", kind: attrDeny, why: whyEval}),
		// singledispatch's register() evaluates string annotations.
		"functools": append(names("functools", "lru_cache", "cache", "cached_property", "partial",
			"partialmethod", "reduce", "wraps", "update_wrapper", "total_ordering", "cmp_to_key",
			"WRAPPER_ASSIGNMENTS", "WRAPPER_UPDATES"),
			attrEntry{pattern: "functools.singledispatch*", kind: attrDeny, why: whyEval},
			attrEntry{pattern: "functools.update_wrapper", kind: attrDeny, why: whyCopyAttrs}),
		"operator": {
			{pattern: "operator.*"},
			{pattern: "operator.attrgetter", kind: attrDeny, why: whyDynamic},
			{pattern: "operator.methodcaller", kind: attrDeny, why: whyDynamic},
			{pattern: "operator.setitem", kind: attrDeny, why: whyMutate},
			{pattern: "operator.delitem", kind: attrDeny, why: whyMutate},
		},
	}
	for _, op := range []string{"iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul", "imod", "imul", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"} {
		t["operator"] = append(t["operator"], attrEntry{pattern: "operator." + op, kind: attrDeny, why: whyMutate})
	}
	return t
}

// names returns an exact entry for module and a tree entry for each name.
func names(module string, list ...string) []attrEntry {
	out := []attrEntry{{pattern: module, kind: attrExact}}
	for _, n := range list {
		out = append(out, attrEntry{pattern: module + "." + n})
	}
	return out
}

// torchTable is torch's: its public namespace (tensor ops, dtypes, classes)
// and the submodules a kernel computes with, minus what loads, saves,
// compiles, hooks, starts processes or changes process-wide state.
func torchTable() []attrEntry {
	t := []attrEntry{{pattern: "torch.*"}}
	// Private aten ops kernels use, by name, as torch.X and as
	// torch.ops.aten.X: an allow-list, since private ops may skip the
	// checks public ones make (rt28b: _cummax_helper writes as many
	// results as its input has into outputs of any size, a heap overflow).
	for _, p := range []string{"_scaled_*", "_int_mm", "_foreach_*", "_weight_int*", "_convert_weight_to_int4pack*", "_grouped_mm", "_assert", "_softmax", "_log_softmax"} {
		t = append(t, attrEntry{pattern: "torch." + p}, attrEntry{pattern: "torch.ops.aten." + p})
	}
	for _, m := range []string{"nn", "nn.functional", "nn.init", "nn.parameter", "nn.common_types",
		"linalg", "fft", "special", "sparse", "nested", "types", "version", "torch_version",
		"return_types", "functional", "amp", "cuda.amp", "cuda.nvtx", "ops.aten",
		"autograd.Function"} {
		t = append(t, attrEntry{pattern: "torch." + m})
	}
	t = append(t, attrEntry{pattern: "torch.signal", kind: attrModules})
	for _, m := range []string{"cuda", "backends", "backends.cuda", "backends.cudnn", "backends.mps",
		"backends.mkldnn", "backends.openmp", "backends.cpu", "distributed", "autograd",
		"autograd.function", "ops", "jit", "compiler", "profiler", "autograd.profiler"} {
		t = append(t, attrEntry{pattern: "torch." + m, kind: attrExact})
	}
	listed := map[string][]string{
		"cuda": {"is_available", "device_count", "current_device", "get_device_properties",
			"get_device_capability", "get_device_name", "get_arch_list", "is_bf16_supported",
			"is_initialized", "synchronize", "current_stream", "default_stream", "stream", "Stream",
			"Event", "device", "device_of", "StreamContext", "is_current_stream_capturing",
			"OutOfMemoryError"},
		"backends.cuda": {"matmul", "is_built", "flash_sdp_enabled", "mem_efficient_sdp_enabled",
			"math_sdp_enabled", "cudnn_sdp_enabled"},
		"backends.cudnn":    {"is_available", "version", "enabled", "allow_tf32", "deterministic", "benchmark"},
		"backends.mps":      {"is_available", "is_built"},
		"backends.mkldnn":   {"is_available"},
		"backends.openmp":   {"is_available"},
		"backends.cpu":      {"get_cpu_capability"},
		"autograd":          {"Function", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled"},
		"autograd.function": {"Function", "FunctionCtx", "once_differentiable"},
		"jit":               {"is_scripting", "is_tracing"},
		// A named range for a profiler someone else runs (hs51): no
		// I/O of its own; the rest of both profiler modules writes traces.
		"profiler":          {"record_function"},
		"autograd.profiler": {"record_function"},
		// Read-only queries (torch 2.x; honest code guards them with
		// hasattr): the rest of torch.compiler compiles (compiler.*).
		"compiler": {"is_compiling", "is_dynamo_compiling"},
		// The collectives, on the group the validator passes.
		"distributed": {"all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
			"reduce_scatter_tensor", "broadcast", "reduce", "all_to_all", "all_to_all_single", "gather", "scatter", "barrier",
			"send", "recv", "isend", "irecv", "batch_isend_irecv", "P2POp", "ReduceOp", "get_rank",
			"get_world_size", "get_global_rank", "get_group_rank", "get_process_group_ranks", "is_available",
			"is_initialized", "get_backend", "ProcessGroup", "Work"},
	}
	for m, list := range listed {
		for _, n := range list {
			t = append(t, attrEntry{pattern: "torch." + m + "." + n})
		}
	}
	deny := []struct {
		why   string
		names []string
	}{
		{whyLoader, []string{"load", "hub", "package", "serialization", "classes", "import_ir_module*", "get_file_path", "ops.load_library", "storage"}},
		// Storages: raw descriptor I/O and sharing (UntypedStorage._new_with_file reads any fileno()).
		{whyStorage, []string{"*Storage", "StorageBase"}},
		{whyFiles, []string{"save", "from_file", "onnx", "profiler", "autograd.profiler"}},
		{whyCodegen, []string{"compile", "compiler.*", "export", "fx", "jit.*", "cond", "while_loop", "func", "_dynamo", "_inductor"}},
		{whyUtils, []string{"utils"}},
		{whyProcesses, []string{"multiprocessing", "futures", "nn.parallel", "jit.fork"}},
		{whySetter, []string{"set_*", "use_deterministic_algorithms", "read_vitals", "backends.*.set_*", "backends.cuda.enable_*", "backends.cuda.preferred_*", "backends.cudnn.flags"}},
		{whyRNG, []string{"manual_seed", "seed", "default_generator", "random", "cuda.manual_seed*", "cuda.seed*", "cuda.set_rng_state*"}},
		{whyDevice, []string{"cuda.set_*", "cuda.graph*", "cuda.CUDAGraph", "cuda.make_graphed_callables", "cuda.empty_cache", "cuda.memory", "cuda.caching_allocator_*", "cuda.ExternalStream", "cuda.CUDAPluggableAllocator", "cuda.change_current_allocator"}},
		{whyHooks, []string{"library", "register_*", "overrides", "nn.modules", "nn.utils", "autograd.graph", "testing",
			// An operator overload's Python kernels and mode tables.
			"ops.aten.*.py_*", "ops.aten.*.*.py_*", "ops.aten.*.python_key*", "ops.aten.*.*.python_key*",
			"ops.aten.*.functorch_table", "ops.aten.*.*.functorch_table"}},
		{whyGlobal, []string{"nn.attention", "backends.cuda.sdp_kernel"}},
		// Sparse tensors and unchecked views: indices that nothing checks
		// against the memory they address read and write any address of
		// the worker (rt25b: sparse_coo_tensor, add_ of a sparse tensor,
		// _reshape_alias), and frombuffer views any Python buffer.
		{whyRawMemory, []string{"sparse", "sparse_*", "_sparse_*", "_to_sparse*", "frombuffer", "_reshape_alias*",
			"_nested_*", "ops.aten.sparse_*", "ops.aten._sparse_*", "ops.aten._to_sparse*", "ops.aten.to_sparse*",
			"ops.aten._reshape_alias*", "ops.aten._nested_*", "ops.aten._coalesce*", "ops.aten._indices*",
			"ops.aten._values*", "ops.aten.sparse_mask*", "ops.aten._unsafe_*", "_unsafe_*"}},
		// Modules the allowed trees re-export under another name (torch
		// 1.13 and 2.x; rt50c: passed as an argument, torch.functional.F
		// reached torch.sys.modules past the scanner): use them by their
		// own names (X.torch, a re-export of an allowed module, is judged
		// by the components after it).
		{whyAlias, []string{"functional.F", "functional.opt_einsum", "nn.functional.utils", "nn.functional.grad",
			"return_types.return_types", "nn.functional.np", "nested.F", "windows"}},
		{whyState, []string{"cuda.memory_*", "cuda.max_memory_*", "cuda.mem_get_info", "cuda.list_gpu_processes",
			"cuda.utilization", "cuda.temperature", "cuda.power_draw", "cuda.clock_rate", "cuda.reset_*"}},
	}
	for _, d := range deny {
		for _, n := range d.names {
			t = append(t, attrEntry{pattern: "torch." + n, kind: attrDeny, why: d.why})
		}
	}
	t = append(t, torchCoreEntries()...)
	// set_* is denied; set_grad_enabled has a rule of its own at module level.
	return append(t, attrEntry{pattern: "torch.set_grad_enabled"})
}

// tritonTable is triton's: the JIT, autotuning, the language (all of it,
// its submodules included) and the device queries kernels size grids by.
func tritonTable() []attrEntry {
	t := names("triton", "jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2",
		"constexpr", "OutOfResources", "reinterpret", "TensorWrapper")
	t = append(t, attrEntry{pattern: "triton.language", kind: attrModules})
	// The global timer, wherever triton's extras export it (clock.go).
	for _, p := range []string{"extra.globaltimer", "extra.*.globaltimer", "extra.*.*.globaltimer",
		"extra.smid", "extra.*.smid", "extra.*.*.smid"} {
		t = append(t, attrEntry{pattern: "triton.language." + p, kind: attrDeny, why: whyClock})
	}
	// The decorators that hand a bundle function Triton's semantic and IR
	// builder (inline assembly and intrinsics from text built at run time).
	for _, p := range []string{"builtin", "core.builtin", "extern", "core.extern", "extern_elementwise",
		"core.extern_elementwise", "semantic", "core.semantic"} {
		t = append(t, attrEntry{pattern: "triton.language." + p, kind: attrDeny, why: whyDeviceCode})
	}
	for _, m := range []string{"runtime", "runtime.driver", "runtime.driver.active", "runtime.driver.active.utils", "runtime.jit"} {
		t = append(t, attrEntry{pattern: "triton." + m, kind: attrExact})
	}
	for _, n := range []string{"runtime.driver.active.get_current_device", "runtime.driver.active.get_current_stream",
		"runtime.driver.active.get_current_target", "runtime.driver.active.utils.get_device_properties",
		"runtime.jit.JITFunction"} {
		t = append(t, attrEntry{pattern: "triton." + n})
	}
	return t
}

// attrPolicy applies the tables.
type attrPolicy struct {
	tables map[string][]compiledEntry
	// submodules holds the real submodules of the allowed packages.
	submodules map[string]bool
}

type compiledEntry struct {
	attrEntry
	parts []string
	score int // literal characters, for ties between equally long patterns
}

func newAttrPolicy(tables map[string][]attrEntry, submodules map[string]bool) *attrPolicy {
	p := &attrPolicy{tables: make(map[string][]compiledEntry), submodules: submodules}
	for root, list := range tables {
		for _, e := range list {
			parts := strings.Split(e.pattern, ".")
			score := 0
			for _, c := range parts {
				score += len(strings.ReplaceAll(c, "*", ""))
			}
			p.tables[root] = append(p.tables[root], compiledEntry{attrEntry: e, parts: parts, score: score})
		}
	}
	return p
}

// verdict is the allow-list's answer for one name.
type verdict struct {
	ok  bool
	why string
}

// check decides a dotted name rooted at an allowed module. Names whose
// root has no table are allowed.
func (p *attrPolicy) check(name string) verdict {
	comps := strings.Split(name, ".")
	table, ok := p.tables[comps[0]]
	if !ok {
		return verdict{ok: true}
	}
	for i, c := range comps {
		if isDunder(c) {
			comps = comps[:i]
			break
		}
	}
	if len(comps) <= 1 {
		return verdict{ok: true}
	}
	best := -1
	for i, e := range table {
		if !e.matches(comps) {
			continue
		}
		if best < 0 || better(e, table[best]) {
			best = i
		}
	}
	shown := strings.Join(comps, ".")
	if len(comps) >= 3 && containerMutator(comps[len(comps)-1]) {
		return verdict{why: whyContainer}
	}
	if best < 0 {
		return verdict{why: "not on the attribute allow-list of " + comps[0]}
	}
	e := table[best]
	switch {
	case e.kind == attrDeny:
		return verdict{why: e.why}
	case e.kind == attrExact && len(e.parts) < len(comps):
		return verdict{why: "not on the attribute allow-list of " + e.pattern}
	}
	for i, c := range comps[1:] {
		if strings.HasPrefix(c, "_") && (i+1 >= len(e.parts) || !strings.HasPrefix(e.parts[i+1], "_")) {
			return verdict{why: "private name " + c + " is not on the attribute allow-list"}
		}
	}
	if e.kind == attrModules {
		return verdict{ok: true}
	}
	for k := 2; k <= len(comps); k++ {
		q := strings.Join(comps[:k], ".")
		if p.submodules[q] && !p.covers(table, comps[:k]) {
			return verdict{why: "module " + q + " (in " + shown + ") is not on the attribute allow-list"}
		}
	}
	return verdict{ok: true}
}

// covers reports whether a real submodule is allowed by an entry of its
// own (a literal pattern equal to it) or by a modules entry above it.
func (p *attrPolicy) covers(table []compiledEntry, comps []string) bool {
	for _, e := range table {
		if e.kind == attrDeny || len(e.parts) > len(comps) || !e.matches(comps[:len(e.parts)]) {
			continue
		}
		if e.kind == attrModules || (len(e.parts) == len(comps) && !strings.Contains(e.pattern, "*")) {
			return true
		}
	}
	return false
}

// matches reports whether the entry's pattern matches a prefix of comps.
func (e compiledEntry) matches(comps []string) bool {
	if len(e.parts) > len(comps) {
		return false
	}
	for i, pat := range e.parts {
		if ok, _ := path.Match(pat, comps[i]); !ok {
			return false
		}
	}
	return true
}

// better reports whether a decides over b: longer patterns, then more
// literal characters, then a deny.
func better(a, b compiledEntry) bool {
	switch {
	case len(a.parts) != len(b.parts):
		return len(a.parts) > len(b.parts)
	case a.score != b.score:
		return a.score > b.score
	}
	return a.kind == attrDeny && b.kind != attrDeny
}

// containerMutator reports whether a method name changes the list, dict or
// set it is called on (torch.nn.functional.GRID_SAMPLE_PADDING_MODES.clear()).
// Read from a module's attribute (three or more components), it mutates
// state the module owns. add and sort are not listed: tensors have them.
func containerMutator(name string) bool {
	switch name {
	case "append", "extend", "insert", "pop", "popitem", "clear", "update", "setdefault",
		"remove", "discard", "difference_update", "intersection_update",
		"symmetric_difference_update", "appendleft", "extendleft", "popleft", "rotate":
		return true
	}
	return false
}
