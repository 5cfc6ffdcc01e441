"""PyTorch with two kinds of process groups at once, as 2D-parallel training
jobs run them: "row" groups (tensor parallel: ranks 0-1, 2-3, ...) and
"column" groups (data parallel: ranks 0, 2, ... and 1, 3, ...), each its own
NCCL communicator and stream, with collectives in flight on both at the same
time plus an all_to_all on the world group.  Through the plugin every
communicator of a process shares that process's copy engine and copy
helper.

One process per GPU (the first NRANKS when set, an even number).  Inputs
are non-zero values naming the sender and position; outputs are poisoned
with NaN first; every element is checked.  Exit code 0 only if all are
right."""
import sys

import torch
import torch.distributed as dist

from torch_ranks import init_rank, spawn, world_size

ROUNDS = 6
SIZES = (1 << 10, 1 << 20, 16 << 20)   # elements per rank (float32)


def value(src, numel, salt):
    idx = torch.arange(numel, device="cuda", dtype=torch.int64)
    return ((idx * 7 + src * 13 + salt * 5) % 61 + 1).to(torch.float32)


def groups(rank, world):
    """Both kinds of group, made by every rank in the same order; returns
    (row group and its ranks, column group and its ranks)."""
    mine = {}
    for kind, members in (("row", [[r, r + 1] for r in range(0, world, 2)]),
                          ("col", [list(range(c, world, 2)) for c in range(2)])):
        for ranks in members:
            g = dist.new_group(ranks)
            if rank in ranks:
                mine[kind] = (g, ranks)
    return mine["row"], mine["col"]


def worker(rank, world, port, results):
    init_rank(rank, world, port)
    (row, row_ranks), (col, col_ranks) = groups(rank, world)
    ok = True
    for rnd in range(ROUNDS):
        for numel in SIZES:
            # Row group: all_reduce; column group: all_gather; world:
            # all_to_all; all three queued before any is waited for.
            red = value(rank, numel, rnd)
            want_red = sum(value(r, numel, rnd) for r in row_ranks)
            mine = value(rank, numel, rnd + 1)
            gathered = torch.full((len(col_ranks) * numel,), float("nan"), device="cuda")
            want_gather = torch.cat([value(r, numel, rnd + 1) for r in col_ranks])
            a2a_in = torch.cat([value(rank * world + p, numel // world or 1, rnd + 2)
                                for p in range(world)])
            a2a_out = torch.full_like(a2a_in, float("nan"))
            want_a2a = torch.cat([value(p * world + rank, numel // world or 1, rnd + 2)
                                  for p in range(world)])
            works = [dist.all_reduce(red, group=row, async_op=True),
                     dist.all_gather_into_tensor(gathered, mine, group=col, async_op=True),
                     dist.all_to_all_single(a2a_out, a2a_in, async_op=True)]
            for w in works:
                w.wait()
            torch.cuda.synchronize()
            for name, got, want in (("row all_reduce", red, want_red),
                                    ("column all_gather", gathered, want_gather),
                                    ("world all_to_all", a2a_out, want_a2a)):
                if not torch.equal(got, want):
                    bad = int((got != want).sum())
                    print(f"rank {rank} round {rnd} {numel} elements: {name}: "
                          f"{bad} wrong", flush=True)
                    ok = False
    dist.destroy_process_group()
    results[rank] = ok


if __name__ == "__main__":
    world = world_size(least=2)
    if world % 2:
        world -= 1
    results = spawn(worker, world)
    good = all(results.get(r, False) for r in range(world))
    print(f"torch row/column groups over {world} GPUs: "
          f"{'all results correct' if good else 'WRONG RESULTS'}")
    sys.exit(0 if good else 1)
