package scan

import (
	"strings"
	"testing"
)

func TestAttributeAllowList(t *testing.T) {
	submodules := map[string]bool{
		"torch.nn": true, "torch.nn.functional": true, "torch.nn.modules": true, "torch.utils": true,
		"torch.utils.data": true, "torch.cuda": true, "torch.cuda.amp": true, "torch.newthing": true,
		"torch.backends": true, "torch.backends.cuda": true, "torch.distributed": true,
		"torch.distributed.distributed_c10d": true, "torch.signal": true, "torch.signal.windows": true,
		"triton.language": true, "triton.language.extra": true, "triton.language.extra.cuda": true,
		"triton.testing": true, "torch._dynamo": true, "torch.compiler": true, "torch.compiler.config": true,
	}
	p := newAttrPolicy(attrTables(), submodules)
	tests := []struct {
		name string
		why  string // "" when allowed; else a part of the reason
	}{
		// torch's public namespace and the submodules a kernel computes with.
		{"torch", ""},
		{"torch.float8_e4m3fn", ""},
		{"torch.Tensor.add", ""},
		{"torch.nn.functional.silu", ""},
		{"torch.nn.Linear", ""},
		{"torch.cuda.get_device_properties", ""},
		{"torch.cuda.amp.autocast", ""},
		{"torch.backends.cuda.matmul.allow_tf32", ""},
		{"torch.distributed.all_reduce", ""},
		{"torch.distributed.ReduceOp.SUM", ""},
		{"torch.signal.windows.hann", ""},
		{"torch.ops.aten.silu", ""},
		{"torch.ops.aten._scaled_dot_product_flash_attention", ""},
		{"torch._scaled_mm", ""},
		{"torch._foreach_add_", ""},
		{"torch.__version__", ""},
		{"torch.Tensor.__name__", ""},
		{"torch.set_grad_enabled", ""},
		{"torch.jit.is_scripting", ""},
		{"torch.compiler", ""}, // the module object: hasattr(torch.compiler, "is_compiling")
		{"torch.compiler.is_compiling", ""},
		{"torch.compiler.is_dynamo_compiling", ""},
		{"triton.jit", ""},
		{"triton.language.extra.cuda.libdevice", ""},
		{"triton.runtime.driver.active.utils.get_device_properties", ""},
		{"math.sqrt", ""},
		{"typing.Optional", ""},
		{"functools.lru_cache", ""},
		{"collections.abc.Sequence", ""},
		{"operator.mul", ""},
		{"numpy.anything", ""}, // no table: a module an operator allows is allowed whole

		// What loads, saves, compiles, hooks, starts processes or sets state.
		{"torch.utils", "torch.utils holds"},
		{"torch.utils.data.DataLoader", "torch.utils holds"},
		{"torch.jit.load", "compiles and loads"},
		{"torch.jit.fork", "starts processes"},
		{"torch.compile", "compiles and loads"},
		{"torch.compiler.compile", "compiles and loads"},
		{"torch.compiler.disable", "compiles and loads"},
		{"torch.compiler.allow_in_graph", "compiles and loads"},
		{"torch.compiler.reset", "compiles and loads"},
		{"torch.compiler.config.x", "compiles and loads"},
		{"torch.compiler.is_compilingx", "compiles and loads"},
		{"torch.compiler._cache", "compiles and loads"},
		{"torch.hub.load", "loads programs"},
		{"torch.load", "loads programs"},
		{"torch.set_printoptions", "process-wide"},
		// torch._C's re-exports: refused by name, but for the types and
		// read-only queries kernels use.
		{"torch.CompilationUnit", "torch._C"},
		{"torch.CompilationUnit.define", "torch._C"},
		{"torch.PyTorchFileWriter", "torch._C"},
		{"torch.ExcludeDispatchKeyGuard", "torch._C"},
		{"torch.DisableTorchFunction", "torch._C"},
		{"torch.fork", "torch._C"},
		{"torch.parse_ir", "torch._C"},
		{"torch.ThroughputBenchmark", "torch._C"},
		{"torch.set_num_threads", "process-wide"},
		{"torch.Generator", ""},
		{"torch.Size", ""},
		{"torch.finfo", ""},
		{"torch.get_default_dtype", ""},
		{"torch.is_grad_enabled", ""},
		{"torch.manual_seed", "random generators"},
		{"torch.default_generator.manual_seed", "random generators"},
		{"torch.cuda.memory._record_memory_history", "engine's"},
		{"torch.cuda.set_stream", "engine's"},
		// the process's and the device's state tells grading from serving
		{"torch.cuda.memory_allocated", "differs between grading and serving"},
		{"torch.cuda.max_memory_reserved", "differs between grading and serving"},
		{"torch.cuda.mem_get_info", "differs between grading and serving"},
		{"torch.cuda.memory_stats", "differs between grading and serving"},
		{"torch.cuda.list_gpu_processes", "differs between grading and serving"},
		{"torch.distributed.is_initialized", ""}, // collective slots of established bundles use it
		{"torch.distributed.get_world_size", ""},
		{"torch.distributed.get_global_rank", ""}, // reduce(dst=)/broadcast(src=) take global ranks
		{"torch.distributed.get_process_group_ranks", ""},
		// Tensor collectives to and from one rank (hs33: an honest
		// all-reduce through gather and scatter); their _object forms
		// pickle and stay refused.
		{"torch.distributed.gather", ""},
		{"torch.distributed.scatter", ""},
		{"torch.distributed.gather_object", "allow-list of torch.distributed"},
		{"torch.distributed.scatter_object_list", "allow-list of torch.distributed"},
		{"torch.distributed.all_gather_object", "allow-list of torch.distributed"},
		{"torch.distributed.broadcast_object_list", "allow-list of torch.distributed"},
		{"torch.cuda.jiterator", "allow-list of torch.cuda"},
		{"torch.distributed.new_group", "allow-list of torch.distributed"},
		{"torch.distributed.distributed_c10d._world", "allow-list of torch.distributed"},
		{"torch.nn.modules.module.register_module_forward_hook", "hooks"},
		{"torch.nn.attention.sdpa_kernel", "SDPA backends"},
		{"torch._dynamo", "compiles"},
		{"torch._C", "private name _C"},
		{"torch.Tensor._make_subclass", "private name _make_subclass"},
		{"torch.newthing.x", "module torch.newthing"},
		{"torch.ops.myns.myop", "allow-list of torch.ops"},
		{"triton.testing.do_bench", "allow-list of triton"},
		{"triton.compiler.compile", "allow-list of triton"},
		{"typing.get_type_hints", "evaluates"},
		{"typing.ForwardRef._evaluate", "evaluates"},
		{"typing.sys", "allow-list of typing"},
		{"functools.singledispatch", "evaluates"},
		{"operator.attrgetter", "reflective"},
		{"operator.setitem", "stores"},
		{"operator.iadd", "stores"},
		{"dataclasses.make_dataclass", "allow-list of dataclasses"},
		{"collections.abc._check_methods", "private"},
	}
	for _, tt := range tests {
		v := p.check(tt.name)
		switch {
		case tt.why == "" && !v.ok:
			t.Errorf("%s: refused (%s), want allowed", tt.name, v.why)
		case tt.why != "" && v.ok:
			t.Errorf("%s: allowed, want refused (%s)", tt.name, tt.why)
		case tt.why != "" && !strings.Contains(v.why, tt.why):
			t.Errorf("%s: refused because %q, want %q", tt.name, v.why, tt.why)
		}
	}
}

// TestAttributeTablesCoverPolicy: every module of the default policy has a
// table, so nothing it allows is allowed whole by accident.
func TestAttributeTablesCoverPolicy(t *testing.T) {
	tables := attrTables()
	for _, m := range DefaultPolicy().AllowedImports {
		if _, ok := tables[m]; !ok {
			t.Errorf("allowed module %q has no attribute table", m)
		}
	}
	for root, list := range tables {
		for _, e := range list {
			if topLevel(e.pattern) != root {
				t.Errorf("table %s holds %q", root, e.pattern)
			}
			if (e.kind == attrDeny) != (e.why != "") {
				t.Errorf("%s: a deny entry needs a reason, and only a deny entry has one", e.pattern)
			}
		}
	}
}
