"""PyTorch send/recv and all_to_all through whatever NCCL network the
environment selects, every element checked, times and bus bandwidth printed.

For issue 4's PyTorch path: run it with and without PyTorch's registration
of its caching allocator with NCCL (TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1,
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) to see whether the plugin
then moves the user's buffers in one copy (scripts/gpu_experiments.sh torch-p2p).

One process per GPU (the first NRANKS when set).  SIZE: bytes each rank sends
per operation (default 1 GiB), ITERS: timed iterations (default 10).  Inputs
are non-zero values that name the sender and the position; outputs are
poisoned with NaN first.  Exit code 0 only if every element was right."""
import os
import sys

import torch
import torch.distributed as dist

from torch_ranks import init_rank, spawn, world_size

WARMUP = 3


def pattern(src, start, numel, device):
    """What rank src sends at element positions start .. start+numel-1."""
    idx = torch.arange(start, start + numel, device=device, dtype=torch.int64)
    return ((idx * 7 + src * 13) % 251 + 1).to(torch.float32)


def timed(fn, iters):
    """Slowest rank's mean time per call in microseconds, ranks started together."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    us = torch.tensor([start.elapsed_time(end) * 1000.0 / iters], device="cuda")
    dist.all_reduce(us, op=dist.ReduceOp.MAX)
    return us.item()


def sendrecv(rank, world, numel, iters):
    """Each rank sends to the next and receives from the previous one."""
    send = pattern(rank, 0, numel, "cuda")
    recv = torch.full((numel,), float("nan"), device="cuda")
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
    return ok, us, numel * 4 / us / 1e3


def alltoall(rank, world, numel, iters):
    """all_to_all_single: block r of each rank's input goes to rank r."""
    block = numel // world
    inp = pattern(rank, rank * numel, block * world, "cuda")
    out = torch.full((block * world,), float("nan"), device="cuda")

    def want():
        return torch.cat([pattern(src, src * numel + rank * block, block, "cuda")
                          for src in range(world)])

    dist.all_to_all_single(out, inp)
    torch.cuda.synchronize()
    ok = bool(torch.equal(out, want()))
    out.fill_(float("nan"))
    us = timed(lambda: dist.all_to_all_single(out, inp), iters)
    ok &= bool(torch.equal(out, want()))
    return ok, us, block * world * 4 * (world - 1) / world / us / 1e3


def worker(rank, world, port, numel, iters, results):
    init_rank(rank, world, port)
    lines, good = [], True
    for name, fn in (("sendrecv", sendrecv), ("alltoall", alltoall)):
        ok, us, busbw = fn(rank, world, numel, iters)
        good &= ok
        lines.append(f"torch {name} {numel * 4} B over {world} GPUs: {us:.1f} us, "
                     f"{busbw:.1f} GB/s busbw, {'correct' if ok else 'WRONG'}")
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
