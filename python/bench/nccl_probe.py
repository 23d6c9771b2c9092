"""Developer aid, outside any sandbox: two NCCL ranks on GPUs 0 and 1 do one
all_reduce (does NCCL work on this machine at all?):

    python3 python/bench/nccl_probe.py

Prints "rank R ok 3.0" for both ranks.
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
    x = torch.ones(1024, device="cuda") * (rank + 1)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print("rank", rank, "ok", x[0].item(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, args=(29533,), nprocs=2)
