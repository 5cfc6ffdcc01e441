"""PyTorch destroys its process group and makes a new one in the same
processes, as an in-process restart does.  NCCL 2.28 unloads the net plugin
with the last communicator and forgets its name (bench/results/failures.md,
run 8), so the second group finds the plugin only with
NCCL_NET_PLUGIN_REF_COUNT=1 in the environment (scripts/gpu_check.sh sets
it).  Every element of an all_reduce in each group is checked.  Exit code 0
only if both groups were made and all results are right."""
import sys

import torch
import torch.distributed as dist

from torch_ranks import init_rank, spawn, world_size

GROUPS = 2


def checked_all_reduce(rank, world, salt):
    numel = 4 << 20
    idx = torch.arange(numel, device="cuda", dtype=torch.int64)
    x = ((idx * 7 + rank * 13 + salt) % 61 + 1).to(torch.float32)
    want = sum(((idx * 7 + r * 13 + salt) % 61 + 1).to(torch.float32) for r in range(world))
    dist.all_reduce(x)
    torch.cuda.synchronize()
    return bool(torch.equal(x, want))


def worker(rank, world, port, results):
    ok = True
    for g in range(GROUPS):
        # A new store per group: the old one went with the old group.
        init_rank(rank, world, port + g)
        ok &= checked_all_reduce(rank, world, g)
        dist.destroy_process_group()
    results[rank] = ok


if __name__ == "__main__":
    world = world_size(least=2)
    results = spawn(worker, world)
    good = all(results.get(r, False) for r in range(world))
    print(f"torch {GROUPS} process groups in turn over {world} GPUs: "
          f"{'all results correct' if good else 'WRONG RESULTS'}")
    sys.exit(0 if good else 1)
