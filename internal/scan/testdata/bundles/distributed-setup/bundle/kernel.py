"""Process groups, stores, RPC and worker processes (distributed-setup,
concurrency)."""
import torch
import torch.distributed as dist
import torch.utils.data
from torch.distributed import TCPStore
from torch.utils.data import DataLoader


def kernel(x, out, group):
    store = dist.TCPStore("127.0.0.1", 0, 1, True)
    fs = dist.FileStore("/tmp/store", 1)
    hs = torch.distributed.HashStore()
    dist.init_process_group("gloo", store=fs, rank=0, world_size=1)
    g = dist.new_group([0])
    dist.distributed_c10d.new_group([0])
    mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (1,))
    torch.distributed.rpc.init_rpc("w")
    loader = torch.utils.data.DataLoader(list(range(4)), num_workers=2)
    fut = torch.jit.fork(torch.neg, x)
    # Legal: collectives on the group the validator hands over.
    dist.all_reduce(x, op=dist.ReduceOp.SUM, group=group)
    rank = dist.get_rank(group)
    out.copy_(x)
