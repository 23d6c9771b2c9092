package scan

// torch re-exports most public names of its C++ core, torch._C, at top
// level (torch/__init__.py copies every public name of dir(torch._C) it
// does not define itself). Among them are the TorchScript compiler
// (CompilationUnit().define compiles a source string the scan never sees,
// and its programs call torch.from_file), IR parsers, serialization readers
// and writers (PyTorchFileWriter.write_record copies any address into a
// file), futures and fork, benchmark runners that run modules on threads,
// and dispatch-key guards. "torch.*" would allow them all, so each is
// refused by name, except the few a kernel uses (torchCoreAllowed).
//
// The list is the union of the re-exports of torch 1.13 (Debian's, CI's)
// and torch 2.11 (the GPU machine's), kept in testdata. The tests fail on
// any of those, or of the installed torch's, that is neither refused nor
// allowed here, so a torch that adds one does not get it allowed by
// "torch.*" unnoticed.

const whyCore = "it is a binding of torch's C++ core (torch._C) that torch re-exports: the TorchScript compiler and IR, serialization readers and writers, futures, benchmark runners and dispatch-key guards load code, reach files and memory or change how operators dispatch; a kernel needs none of them"

// torchCoreAllowed are the re-exports of torch._C a kernel may use: types
// and their metadata, and read-only queries of settings the validator pins
// alike in verify and serving.
var torchCoreAllowed = []string{
	"Generator", "Size", "Stream", "Event", "device", "dtype", "finfo", "iinfo", "layout",
	"memory_format", "qscheme", "get_default_dtype", "is_grad_enabled", "is_inference_mode_enabled",
	"has_cuda", "has_cudnn", "has_lapack", "has_mkl", "has_mkldnn", "has_mps", "has_openmp",
	"has_spectral", "get_num_threads", "get_num_interop_threads", "is_autocast_enabled",
	"is_autocast_cpu_enabled", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype",
	"is_autocast_cache_enabled", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
	// torch 2.11
	"AcceleratorError", "OutOfMemoryError", "get_autocast_dtype", "get_autocast_ipu_dtype",
	"get_autocast_xla_dtype", "is_autocast_ipu_enabled", "is_autocast_xla_enabled",
}

// torchCoreRefused are the other re-exports of torch._C, less those
// torch's table refuses already (set_*, default_generator,
// import_ir_module*, read_vitals).
var torchCoreRefused = []string{
	// torch 1.13
	"AVG", "AggregationType", "AliasDb", "AnyType", "Argument", "ArgumentSpec", "BenchmarkConfig",
	"BenchmarkExecutionStats", "Block", "BoolType", "BufferDict", "CONV_BN_FUSION", "CallStack",
	"Capsule", "ClassType", "Code", "CompilationUnit", "CompleteArgumentSpec", "ComplexType",
	"ConcreteModuleType", "ConcreteModuleTypeBuilder", "DeepCopyMemoTable",
	"DeserializationStorageContext", "DeviceObjType", "DictType", "DisableTorchFunction",
	"DispatchKey", "DispatchKeySet", "EnumType", "ErrorReport", "ExcludeDispatchKeyGuard",
	"ExecutionPlan", "FUSE_ADD_RELU", "FatalError", "FileCheck", "FloatType", "FunctionSchema",
	"Future", "FutureType", "Gradient", "Graph", "GraphExecutorState", "HOIST_CONV_PACKED_PARAMS",
	"INSERT_FOLD_PREPACK_OPS", "IODescriptor", "InferredType", "IntType", "InterfaceType",
	"JITException", "ListType", "LiteScriptModule", "LockingLogger", "LoggerBase",
	"MobileOptimizerType", "ModuleDict", "Node", "NoneType", "NoopLogger", "NumberType",
	"OperatorInfo", "OptionalType", "ParameterDict", "PyObjectType", "PyTorchFileReader",
	"PyTorchFileWriter", "REMOVE_DROPOUT", "RRefType", "SUM", "ScriptClass", "ScriptClassFunction",
	"ScriptDict", "ScriptDictIterator", "ScriptDictKeyIterator", "ScriptFunction", "ScriptList",
	"ScriptListIterator", "ScriptMethod", "ScriptModule", "ScriptModuleSerializer", "ScriptObject",
	"ScriptObjectProperty", "SerializationStorageContext", "StaticModule", "StorageBase",
	"StreamObjType", "StringType", "SymFloatNode", "SymIntNode", "SymIntType", "Tag", "TensorType",
	"ThroughputBenchmark", "TracingState", "TupleType", "Type", "UnionType", "Use", "Value",
	"autocast_decrement_nesting", "autocast_increment_nesting", "clear_autocast_cache", "cpp",
	"fork", "init_num_threads", "merge_type_from_type_comment", "parse_ir", "parse_schema",
	"parse_type_comment", "unify_type_list", "vitals_enabled", "wait",
	// torch 2.11
	"AwaitType", "DisableTorchFunctionSubclass", "SymBoolType",
}

// torchCoreEntries are the deny entries of torchCoreRefused for torch's
// table.
func torchCoreEntries() []attrEntry {
	out := make([]attrEntry, 0, len(torchCoreRefused))
	for _, n := range torchCoreRefused {
		out = append(out, attrEntry{pattern: "torch." + n, kind: attrDeny, why: whyCore})
	}
	return out
}
