package scan

// The dotted names and attribute names that break a specific rule wherever
// they appear (deny rules with their own message). The attribute allow-list
// (attrs.go) refuses everything else a bundle may not use.

// refRule maps a dotted-name prefix to the rule it breaks. A reference
// matches when it equals the prefix or continues it with a dot.
type refRule struct {
	prefix string
	rule   string
	why    string
	// moduleLevelOnly restricts the entry to uses in module-level code (a
	// setter that is harmless inside a function, e.g. as a context manager).
	moduleLevelOnly bool
}

// referenceRules returns the dotted names that break a rule wherever they
// appear (import, attribute chain or name bound by an import). Matching is
// done on the resolved name, so "import torch as t; t.load" is torch.load.
func referenceRules() []refRule {
	const (
		imp    = "bundles may not touch the import system; import what you need with a plain import"
		loader = "deserializers and native loaders run arbitrary code; compute with torch and triton instead"
		file   = "this reads or writes files (or shared memory) without open(); a kernel computes only on the tensors it is given"
		dist   = "the validator hands the candidate its process group; creating stores, groups or RPC agents opens sockets and files"
		native = "this compiles and loads native code; write the kernel in triton or a declared CUDA source"
		ffi    = "foreign-function interfaces bypass the sandbox; write the kernel in triton or a declared CUDA source"
		conc   = "the engine owns threads, processes and streams; keep the kernel synchronous"
		setter = "process-wide settings belong to the validator; remove the call"
		priv   = "private internals are not a stable or allowed surface; use the public API"
		dyn    = "reflective attribute access hides what is touched; use plain attribute access"
	)
	rules := []refRule{
		{prefix: "sys.modules", rule: RuleSysModules, why: imp},
		{prefix: "sys.path", rule: RuleSysModules, why: imp},
		{prefix: "sys.meta_path", rule: RuleSysModules, why: imp},
		{prefix: "sys.path_hooks", rule: RuleSysModules, why: imp},
		{prefix: "sys.path_importer_cache", rule: RuleSysModules, why: imp},
		{prefix: "importlib", rule: RuleSysModules, why: imp},
		{prefix: "imp", rule: RuleSysModules, why: imp},
		{prefix: "pkgutil", rule: RuleSysModules, why: imp},
		{prefix: "runpy", rule: RuleSysModules, why: imp},
		{prefix: "zipimport", rule: RuleSysModules, why: imp},

		{prefix: "torch.load", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.jit.load", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.serialization", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.utils.cpp_extension", rule: RuleUnsafeLoader, why: "declared CUDA sources are built by the validator; do not build or load native code at import"},
		{prefix: "torch.ops.load_library", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.classes.load_library", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.hub", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.package", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.utils.model_zoo", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch._inductor.codecache", rule: RuleUnsafeLoader, why: native},
		{prefix: "torch._inductor.cpp_builder", rule: RuleUnsafeLoader, why: native},
		{prefix: "triton.runtime.build", rule: RuleUnsafeLoader, why: native},
		{prefix: "torch.export.load", rule: RuleUnsafeLoader, why: loader},
		{prefix: "pickle", rule: RuleUnsafeLoader, why: loader},
		{prefix: "_pickle", rule: RuleUnsafeLoader, why: loader},
		{prefix: "cPickle", rule: RuleUnsafeLoader, why: loader},
		{prefix: "marshal", rule: RuleUnsafeLoader, why: loader},
		{prefix: "shelve", rule: RuleUnsafeLoader, why: loader},
		{prefix: "dill", rule: RuleUnsafeLoader, why: loader},
		{prefix: "cloudpickle", rule: RuleUnsafeLoader, why: loader},
		{prefix: "joblib", rule: RuleUnsafeLoader, why: loader},

		{prefix: "torch.from_file", rule: RuleFileAccess, why: file},
		{prefix: "torch.save", rule: RuleFileAccess, why: file},
		{prefix: "torch.jit.save", rule: RuleFileAccess, why: file},
		{prefix: "torch.export.save", rule: RuleFileAccess, why: file},
		{prefix: "torch.onnx", rule: RuleFileAccess, why: file},
		{prefix: "torch.utils.tensorboard", rule: RuleFileAccess, why: file},
		{prefix: "torch.distributed.checkpoint", rule: RuleFileAccess, why: file},

		{prefix: "ctypes", rule: RuleNativeFFI, why: ffi},
		{prefix: "_ctypes", rule: RuleNativeFFI, why: ffi},
		{prefix: "cffi", rule: RuleNativeFFI, why: ffi},
		{prefix: "_cffi_backend", rule: RuleNativeFFI, why: ffi},

		{prefix: "threading", rule: RuleConcurrency, why: conc},
		{prefix: "_thread", rule: RuleConcurrency, why: conc},
		{prefix: "multiprocessing", rule: RuleConcurrency, why: conc},
		{prefix: "torch.multiprocessing", rule: RuleConcurrency, why: conc},
		{prefix: "torch.utils.data.DataLoader", rule: RuleConcurrency, why: "a DataLoader with workers starts processes; " + conc},
		{prefix: "torch.utils.data.dataloader", rule: RuleConcurrency, why: "a DataLoader with workers starts processes; " + conc},
		{prefix: "torch.jit.fork", rule: RuleConcurrency, why: conc},
		{prefix: "torch._inductor.async_compile", rule: RuleConcurrency, why: conc},
		{prefix: "torch._inductor.compile_worker", rule: RuleConcurrency, why: conc},
		{prefix: "concurrent", rule: RuleConcurrency, why: conc},
		{prefix: "subprocess", rule: RuleConcurrency, why: conc},
		{prefix: "_posixsubprocess", rule: RuleConcurrency, why: conc},
		{prefix: "asyncio", rule: RuleConcurrency, why: conc},
		{prefix: "os.fork", rule: RuleConcurrency, why: conc},
		{prefix: "os.forkpty", rule: RuleConcurrency, why: conc},
		{prefix: "os.posix_spawn", rule: RuleConcurrency, why: conc},
		{prefix: "os.posix_spawnp", rule: RuleConcurrency, why: conc},
		{prefix: "os.system", rule: RuleConcurrency, why: conc},
		{prefix: "os.popen", rule: RuleConcurrency, why: conc},

		{prefix: "torch.set_default_dtype", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_default_tensor_type", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_default_device", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.manual_seed", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.seed", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_rng_state", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.random.manual_seed", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.random.set_rng_state", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.manual_seed", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.manual_seed_all", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.set_rng_state", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.set_device", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.set_per_process_memory_fraction", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.set_sync_debug_mode", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_num_threads", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_num_interop_threads", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_flush_denormal", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.use_deterministic_algorithms", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_float32_matmul_precision", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_warn_always", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.autograd.set_detect_anomaly", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.library", rule: RuleGlobalMutation, why: "registering operators changes the process-wide dispatcher; expose a plain function"},
		{prefix: "torch.set_grad_enabled", rule: RuleGlobalMutation, why: "at module level this switches autograd off for the whole engine; use it inside the entry function or `with torch.no_grad():`", moduleLevelOnly: true},
		{prefix: "torch.autograd.set_grad_enabled", rule: RuleGlobalMutation, why: "at module level this switches autograd off for the whole engine; use it inside the entry function or `with torch.no_grad():`", moduleLevelOnly: true},

		{prefix: "torch._C", rule: RulePrivateAPI, why: priv},
		{prefix: "torch._dynamo.config", rule: RulePrivateAPI, why: priv},
		{prefix: "torch._inductor.config", rule: RulePrivateAPI, why: priv},
		{prefix: "torch._functorch.config", rule: RulePrivateAPI, why: priv},
		{prefix: "triton._C", rule: RulePrivateAPI, why: priv},

		{prefix: "operator.attrgetter", rule: RuleDynamicAttribute, why: dyn},
		{prefix: "operator.methodcaller", rule: RuleDynamicAttribute, why: dyn},

		{prefix: "torch.distributed.device_mesh", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.rendezvous", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.rpc", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.elastic", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.launch", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.launcher", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.run", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.Backend.register_backend", rule: RuleDistributedSetup, why: dist},
	}
	// The forbidden builtins by their module's name (typing.sys.modules is
	// sys.modules; dataclasses.builtins.open is open).
	for _, name := range []string{
		"eval", "exec", "compile", "__import__", "open", "input", "breakpoint",
		"help", "license", "credits", "copyright", "globals", "vars", "locals", "dir",
	} {
		rules = append(rules, refRule{prefix: "builtins." + name, rule: RuleForbiddenBuiltin,
			why: "this is the " + name + "() builtin: bundles may not evaluate code, reach the file system or the interpreter's namespaces"})
	}
	// Stores and group constructors, as torch.distributed re-exports them
	// and where they are defined.
	for _, pkg := range []string{"torch.distributed", "torch.distributed.distributed_c10d"} {
		for _, name := range []string{
			"Store", "TCPStore", "FileStore", "HashStore", "PrefixStore",
			"init_process_group", "destroy_process_group", "new_group",
			"new_subgroups", "new_subgroups_by_enumeration", "split_group",
			"init_device_mesh",
		} {
			rules = append(rules, refRule{prefix: pkg + "." + name, rule: RuleDistributedSetup, why: dist})
		}
	}
	return rules
}

// attributeRules maps attribute names that break a rule on whatever object
// they are read from: a storage reached from any tensor
// (x.untyped_storage().from_file) or torch.ops reached through a private
// module (torch._ops.ops.load_library) needs no policed name to get there.
func attributeRules() map[string]refRule {
	const (
		file   = "this reads or writes files (or shared memory) without open(); a kernel computes only on the tensors it is given"
		loader = "this loads native code; write the kernel in triton or a declared CUDA source"
		imp    = "bundles may not touch the import system; import what you need with a plain import"
		setter = "process-wide settings belong to the validator; remove the call"
	)
	out := make(map[string]refRule)
	for _, name := range []string{
		"from_file", "fromfile", "tofile",
		"_new_shared", "_new_shared_filename_cpu", "_new_using_filename_cpu",
		"_share_filename_cpu_", "_new_shared_fd_cpu", "_new_using_fd_cpu",
		"_share_fd_cpu_", "share_memory_",
		"share_memory", // nn.Module.share_memory: share_memory_ on every parameter
		"dumps",        // numpy's ndarray.dumps pickles
		"_dump_snapshot", "_save_segment_usage", "_save_memory_usage",
		"export_chrome_trace", "export_stacks", "export_memory_timeline",
		"dump", // numpy's ndarray.dump pickles to a file
		// A storage's raw descriptor I/O and sharing: write(2) and read(2)
		// on any descriptor number, CUDA IPC handles.
		"_write_file", "_set_from_file", "_new_shared_cuda", "_share_cuda_",
		"_get_shared_fd", "_release_ipc_counter", "_release_ipc_counter_cuda",
		"_new_with_file", // read(2) from any object's fileno() (session 21's red team)
		"_weak_ref", "_new_with_weak_ptr", "_free_weak_ref", "_expired",
		"_shared_decref", "_shared_incref",
	} {
		out[name] = refRule{prefix: name, rule: RuleFileAccess, why: file}
	}
	// numpy's ndarray.ctypes (x.numpy().ctypes) holds the ctypes module.
	for _, name := range []string{"ctypes", "_ctypes"} {
		out[name] = refRule{prefix: name, rule: RuleNativeFFI,
			why: "foreign-function interfaces bypass the sandbox; write the kernel in triton or a declared CUDA source"}
	}
	for _, name := range []string{"load_library", "CUDAPluggableAllocator"} {
		out[name] = refRule{prefix: name, rule: RuleUnsafeLoader, why: loader}
	}
	// A tensor's storage object (raw descriptor I/O, sharing), its version
	// counter and C handle tell how the validator allocated or filled an
	// input (verify's memory and the engine's are made alike, but a
	// kernel has no honest use for these) and reach what the names above
	// police. The names are refused on any object, the bundle's own too:
	// a bundle class may derive from torch.Tensor, whose self is a tensor.
	const internals = "a tensor's storage, version counter and C handle are the validator's bookkeeping (raw descriptor I/O, how an input was allocated and written); a kernel computes on the tensor itself (an attribute of your own by that name needs another name)"
	for _, name := range []string{
		"storage", "untyped_storage", "typed_storage", "_typed_storage", "_untyped_storage",
		"_version", "_cdata", "_set_cdata",
	} {
		out[name] = refRule{prefix: name, rule: RuleTensorInternals, why: internals}
	}
	// A tensor's other private handles (rt50b, session 50: x._reduce_ex_internal(2)
	// is the body of __reduce_ex__ and hands back the storage): its
	// pickling, the base and view state of a view (the allocation around
	// an output, how the validator laid out an input), subclass
	// constructors (a tensor with its own dispatch) and autograd's hooks.
	const private = "a tensor's pickling, view base, subclassing and autograd internals reach its storage, the allocation around it and torch's dispatch; a kernel computes on the tensor itself (an attribute of your own by that name on anything but self of a plain class needs another name)"
	for name := range tensorPrivate {
		out[name] = refRule{prefix: name, rule: RuleTensorInternals, why: private}
	}
	// typing's forward references evaluate their string as code in
	// typing's own frame (typing.Optional["__import__('sys')"]).
	for _, name := range []string{"_evaluate", "_eval_type", "evaluate_forward_ref"} {
		out[name] = refRule{prefix: name, rule: RuleForbiddenBuiltin,
			why: "it evaluates a string as code (typing's forward references); bundles may not evaluate code"}
	}
	// A sparse tensor from any tensor, and the unchecked ops on one
	// (whyRawMemory in attrs.go; rt25b's sparse_oob_guard_blind,
	// reshape_alias_hook_blind).
	const raw = "sparse tensors and unchecked views address memory through indices nothing checks against their storage (any address of the worker); compute on dense tensors and their checked views"
	for _, name := range []string{"to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr",
		"to_sparse_bsc", "_to_sparse", "sparse_mask", "_sparse_mask_projection", "sparse_resize_", "sparse_resize_and_clear_",
		"_coalesced_", "_indices", "_values", "sparse_coo_tensor", "_sparse_coo_tensor_unsafe", "_reshape_alias",
		"_reshape_alias_copy", "frombuffer", "_sparse_csr_tensor_unsafe", "_sparse_compressed_tensor_unsafe",
		"sparse_compressed_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor",
		"sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc"} {
		out[name] = refRule{prefix: name, rule: RuleTensorInternals, why: raw}
	}
	out["import_module"] = refRule{prefix: "import_module", rule: RuleSysModules, why: imp}
	out["change_current_allocator"] = refRule{prefix: "change_current_allocator", rule: RuleGlobalMutation, why: setter}
	return out
}

// tensorPrivate are a tensor's private handles refused on any object since
// session 50 (attributeRules), but as an attribute of self in a method of
// a bundle class that derives from nothing but object, torch.nn.Module or
// such classes of its own (hs50c: a KV pool's self._storage, a RoPE
// class's self._base are honest names there; a torch.Tensor subclass's
// self is a tensor).
var tensorPrivate = map[string]bool{
	"_reduce_ex_internal": true, "_storage": true, "_base": true, "_is_view": true, "_view_func": true,
	"_view_func_unsafe": true, "_make_subclass": true, "_make_wrapper_subclass": true, "_python_dispatch": true,
	"_fix_weakref": true, "_use_count": true, "_backward_hooks": true, "_post_accumulate_grad_hooks": true,
	"_rebuild_from_type": true, "_rebuild_from_type_v2": true, "_rebuild_tensor": true, "_rebuild_tensor_v2": true,
}
