"""File and shared-memory access without open() (file-access)."""
import torch
import torch.utils.model_zoo
from torch import from_file


def kernel(x, out):
    a = torch.from_file("/etc/hostname", size=1, dtype=torch.uint8)
    b = torch.UntypedStorage.from_file("/etc/hostname", False, 1)
    c = torch.ByteStorage.from_file("/etc/hostname", False, 1)
    d = x.untyped_storage().from_file("/etc/hostname", False, 1)
    e = getattr(type(x.untyped_storage()), "from_file")
    torch.save(x, "/tmp/x.pt")
    torch.jit.save(None, "/tmp/m.pt")
    x.numpy().tofile("/tmp/x.bin")
    s = torch.UntypedStorage._new_shared_filename_cpu(16)
    x.share_memory_()
    sd = torch.utils.model_zoo.load_url("http://example.invalid/w.pt")
    out.copy_(x)


def elsewhere(x):
    from torch._ops import ops
    from torch.cuda.memory import CUDAPluggableAllocator
    ops.load_library("/tmp/libx.so")
    torch.cuda.memory._dump_snapshot("/tmp/snapshot.pickle")
    torch.ops.import_module("mypkg")
    with torch.profiler.profile() as prof:
        pass
    prof.export_chrome_trace("/tmp/trace.json")
    torch._inductor.codecache.CppCodeCache.load("int x;")
    triton.runtime.build._build("m", "/tmp/m.c", "/tmp")
