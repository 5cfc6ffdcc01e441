"""A PyTorch job on registered buffers, as README.md's "Use it" shows: its
tensors come from a torch.cuda.MemPool over the process group's NCCL
allocator (ncclMemAlloc memory), and the pool is registered with the
group's communicator (register_mem_pool), so NCCL hands the net plugin the
tensors themselves.  An all_reduce and a send/recv run on them and every
element is checked.

One process per rank, started the way torchrun starts them (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT):

    torchrun --nproc-per-node=<GPUs> scripts/torch_registered.py

Each rank uses GPU LOCAL_RANK.  scripts/gpu_check.sh's torch-reg mode
starts two ranks on GPU 0 posing as two hosts.

Exit 0: every element right; 1: a wrong element; 2: this PyTorch lacks
the allocator API (PyTorch 2.7 or later has it)."""
import os
import sys

import torch
import torch.distributed as dist

SIZES = (1, 1000, 1 << 20, 16 << 20)	# float32 elements per operation


def missing_api():
    """What this PyTorch lacks of the NCCL allocator API, or None."""
    pg = getattr(dist, "ProcessGroupNCCL", None)
    if not dist.is_available() or not dist.is_nccl_available() or pg is None:
        return "no NCCL process group"
    for name, have in (("torch.cuda.MemPool", hasattr(torch.cuda, "MemPool")),
                       ("torch.cuda.use_mem_pool", hasattr(torch.cuda, "use_mem_pool")),
                       ("ProcessGroupNCCL.mem_allocator", hasattr(pg, "mem_allocator"))):
        if not have:
            return f"no {name}"
    return None


def pattern(src, numel):
    """What rank src contributes: small integers, so sums are exact."""
    idx = torch.arange(numel, device="cuda", dtype=torch.int64)
    return ((idx * 7 + src * 13) % 61 + 1).to(torch.float32)


def wrong(got, want):
    """How many elements differ (NaN, the poison, counts as wrong)."""
    return int((got != want).sum().item())


def main():
    why = missing_api()
    if why:
        print(f"torch_registered: torch {torch.__version__} has {why}; "
              "ncclMemAlloc tensors need PyTorch 2.7 or later", file=sys.stderr)
        return 2
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    backend = dist.group.WORLD._get_backend(device)

    # The tensors NCCL moves come from the pool; the references are made
    # outside it.  Registering after allocating also suits PyTorch 2.7,
    # which registers only what the pool holds at that moment.
    pool = torch.cuda.MemPool(backend.mem_allocator)
    with torch.cuda.use_mem_pool(pool):
        bufs = [(torch.empty(n, device=device), torch.empty(n, device=device)) for n in SIZES]
    registered = hasattr(backend, "register_mem_pool")
    if registered:
        backend.register_mem_pool(pool)

    bad = 0
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for (x, recv), n in zip(bufs, SIZES):
        x.copy_(pattern(rank, n))
        dist.all_reduce(x)
        bad += wrong(x, sum(pattern(r, n) for r in range(world)))

        x.copy_(pattern(rank, n))
        recv.fill_(float("nan"))
        ops = [dist.P2POp(dist.isend, x, nxt), dist.P2POp(dist.irecv, recv, prv)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        bad += wrong(recv, pattern(prv, n))
    torch.cuda.synchronize()

    if registered:
        backend.deregister_mem_pool(pool)
    del bufs, x, recv
    dist.destroy_process_group()
    print(f"torch_registered rank {rank} of {world}: all_reduce and send/recv of "
          f"{', '.join(str(n * 4) for n in SIZES)} B on ncclMemAlloc tensors, "
          f"{'registered' if registered else 'not registered (no register_mem_pool)'}: "
          f"{'all elements correct' if not bad else f'{bad} WRONG elements'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
