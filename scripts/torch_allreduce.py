"""PyTorch all-reduce through whatever NCCL network the environment selects.
One process per GPU (the first NRANKS GPUs when set, as scripts/gpu_check.sh
does); inputs are small non-zero integers so the sum is exact; every element
of the result is checked. Exit code 0 only if all are right."""
import sys

import torch
import torch.distributed as dist

from torch_ranks import init_rank, spawn, world_size


def worker(rank, world, port, results):
    init_rank(rank, world, port)
    ok = True
    for numel in (1, 1000, 1 << 20, 32 << 20):
        idx = torch.arange(numel, device="cuda", dtype=torch.int64)
        x = ((idx * 7 + rank * 13) % 61 + 1).to(torch.float32)
        want = sum(((idx * 7 + r * 13) % 61 + 1).to(torch.float32) for r in range(world))
        dist.all_reduce(x)
        torch.cuda.synchronize()
        ok &= bool(torch.equal(x, want))
    dist.destroy_process_group()
    results[rank] = ok


if __name__ == "__main__":
    world = world_size()
    results = spawn(worker, world)
    good = all(results.get(r, False) for r in range(world))
    print(f"torch all_reduce over {world} GPUs: {'all results correct' if good else 'WRONG RESULTS'}")
    sys.exit(0 if good else 1)
