"""PyTorch send/recv and all_to_all through whatever NCCL network the
environment selects, every element checked, times and bus bandwidth printed.

For issue 4's PyTorch path: run it with and without the user buffers
registered with NCCL to see whether the plugin then moves them in one copy.
PyTorch registers them in two ways:
  - TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1: every segment of its
    caching allocator (cudaMalloc memory).  PyTorch turns the hook off under
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
  - TORCH_REG=pool (this script): the buffers come from a torch.cuda.MemPool
    over the process group's NCCL allocator (ncclMemAlloc, cuMem memory),
    which the process group registers (register_mem_pool).

One process per GPU (the first NRANKS when set).  SIZE: bytes each rank sends
per operation (default 1 GiB), ITERS: timed iterations (default 10),
TORCH_WARM=1: an all_reduce and a 2 s pause before the first timed run.  Inputs
are non-zero values that name the sender and the position; outputs are
poisoned with NaN first.  Exit code 0 only if every element was right."""
import os
import sys
import time

import torch
import torch.distributed as dist

from torch_ranks import init_rank, spawn, world_size

WARMUP = 3


def pattern(src, start, numel, device):
    """What rank src sends at element positions start .. start+numel-1."""
    idx = torch.arange(start, start + numel, device=device, dtype=torch.int64)
    return ((idx * 7 + src * 13) % 251 + 1).to(torch.float32)


def timed(fn, iters):
    """Mean, median (the upper one for an even count) and slowest time per
    call in microseconds, ranks started together, and the slowest call's
    place.  Each is the largest over the ranks, taken on its own, so the
    four may come from different ranks.  Each call is timed on its own
    as well, so that a stall in one shows apart from a uniform slowdown."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    marks[0].record()
    for i in range(iters):
        fn()
        marks[i + 1].record()
    torch.cuda.synchronize()
    each = [marks[i].elapsed_time(marks[i + 1]) * 1000.0 for i in range(iters)]
    mean = marks[0].elapsed_time(marks[-1]) * 1000.0 / iters
    slowest = max(range(iters), key=lambda i: each[i])
    us = torch.tensor([mean, sorted(each)[iters // 2], each[slowest], slowest], device="cuda")
    dist.all_reduce(us, op=dist.ReduceOp.MAX)
    return us.tolist()


def warm_up():
    """TORCH_WARM=1: an all_reduce and a pause before the timed runs, so that
    NCCL's first collective (it connects its rings then) has finished all
    its work before send/recv is timed."""
    if os.environ.get("TORCH_WARM", "") != "1":
        return
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    dist.barrier()
    torch.cuda.synchronize()
    time.sleep(2)


def allocator(backend):
    """alloc(numel) for the checked buffers and the pool they come from
    (None: PyTorch's caching allocator)."""
    if os.environ.get("TORCH_REG", "") != "pool":
        return (lambda numel: torch.empty(numel, device="cuda")), None
    if not hasattr(backend, "register_mem_pool"):
        sys.exit(f"TORCH_REG=pool: torch {torch.__version__} has no register_mem_pool")
    pool = torch.cuda.MemPool(backend.mem_allocator)

    def alloc(numel):
        with torch.cuda.use_mem_pool(pool):
            return torch.empty(numel, device="cuda")
    return alloc, pool


def sendrecv(rank, world, send, recv, iters):
    """Each rank sends to the next and receives from the previous one.
    Returns whether every element was right, timed()'s times, and the bytes
    a call moves per rank by nccl-tests' bus bandwidth rule."""
    numel = send.numel()
    send.copy_(pattern(rank, 0, numel, "cuda"))
    recv.fill_(float("nan"))
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    def step():
        ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()

    step()
    torch.cuda.synchronize()
    ok = bool(torch.equal(recv, pattern(prv, 0, numel, "cuda")))
    recv.fill_(float("nan"))
    us = timed(step, iters)
    ok &= bool(torch.equal(recv, pattern(prv, 0, numel, "cuda")))
    return ok, us, numel * 4


def alltoall(rank, world, inp, out, iters):
    """all_to_all_single: block r of each rank's input goes to rank r.
    Returns what sendrecv() returns."""
    numel = inp.numel()
    block = numel // world
    inp.copy_(pattern(rank, rank * numel, numel, "cuda"))
    out.fill_(float("nan"))

    def want():
        return torch.cat([pattern(src, src * numel + rank * block, block, "cuda")
                          for src in range(world)])

    dist.all_to_all_single(out, inp)
    torch.cuda.synchronize()
    ok = bool(torch.equal(out, want()))
    out.fill_(float("nan"))
    us = timed(lambda: dist.all_to_all_single(out, inp), iters)
    ok &= bool(torch.equal(out, want()))
    return ok, us, block * world * 4 * (world - 1) / world


def worker(rank, world, port, numel, iters, results):
    init_rank(rank, world, port)
    backend = dist.group.WORLD._get_backend(torch.device("cuda", rank))
    alloc, pool = allocator(backend)
    bufs = [alloc(numel) for _ in range(4)]
    if pool is not None:
        backend.register_mem_pool(pool)
    warm_up()
    lines, good = [], True
    for name, fn, a, b in (("sendrecv", sendrecv, bufs[0], bufs[1]),
                           ("alltoall", alltoall, bufs[2], bufs[3])):
        ok, (mean, median, slowest, place), bus_bytes = fn(rank, world, a, b, iters)
        good &= ok
        lines.append(f"torch {name} {numel * 4} B over {world} GPUs: {mean:.1f} us, "
                     f"{bus_bytes / mean / 1e3:.1f} GB/s busbw, {'correct' if ok else 'WRONG'}"
                     f" (one call: median {median:.1f} us, {bus_bytes / median / 1e3:.1f} GB/s;"
                     f" slowest {slowest:.1f} us, call {int(place) + 1} of {iters})")
    torch.cuda.synchronize()
    if pool is not None:
        backend.deregister_mem_pool(pool)
    del bufs
    dist.destroy_process_group()
    results[rank] = (good, lines)


def main():
    world = world_size(least=2)
    size = int(os.environ.get("SIZE", 1 << 30))
    iters = int(os.environ.get("ITERS", 10))
    numel = size // 4 // world * world
    if numel < world:
        sys.exit(f"SIZE={size} is too small for {world} ranks")
    results = spawn(worker, world, numel, iters)
    good = all(results.get(r, (False, []))[0] for r in range(world))
    for line in results.get(0, (False, ["rank 0 gave no result"]))[1]:
        print(line)
    print(f"torch p2p over {world} GPUs: {'all results correct' if good else 'WRONG RESULTS'}")
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
