#!/usr/bin/env python3
"""The end-to-end training benchmark's run: one process per rank
(torch.multiprocessing), one NCCL process group, then each workload of
workloads.py in turn on synthetic data from a fixed seed: WARMUP steps,
then STEPS timed ones, each timed on the host between two
torch.cuda.synchronize() calls, the slowest rank's time taken per step.

Rank 0 writes OUT/WORKLOAD.json per workload: the losses of every step
(the mean over ranks), the timed steps' milliseconds, whether the ranks'
replicated parameters agree bit for bit after training (ddp, moe), NCCL's
and PyTorch's versions.  MODE only labels the run: how NCCL is routed
(natively, through the plugin) is the environment's, as scripts/e2e.sh
sets it.

--posed: the ranks share GPU 0, each with its own NCCL_HOSTID, so that
NCCL joins them through its network (native: NCCL's Socket net; plugin:
the copy engines): a loss check on a host with one GPU; the times mean
nothing there, and the model is small unless the knobs say otherwise.

Model knobs (options, or E2E_* variables): layers, hidden, heads, seq,
batch (sequences per rank and step), vocab; tp-reduce (fp32 or bf16),
experts (per rank), topk, capacity (factor).  A run ends, whatever hangs,
after --timeout seconds.

Usage: train.py --mode native --out DIR [--workloads ddp,fsdp,tp,moe]
                [--ranks N] [--posed] [--steps 20] [--warmup 5]"""
import argparse
import datetime
import gc
import json
import os
import signal
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402
from model import Config, synthetic_batches  # noqa: E402

BATCHES = 8                     # distinct batches, cycled
FULL = Config()
POSED = Config(vocab=8192, hidden=1024, heads=8, layers=2, seq=512, batch=1)
# Variables that tell how a run was routed, kept with its result.
ROUTE_VARS = ("NCCL_ENV_PLUGIN", "NCCL_NET_PLUGIN", "NCCL_NET", "NCCL_P2P_DISABLE",
              "NCCL_SHM_DISABLE", "NCCL_PASS_SM", "NCCL_PROTO", "NCCL_ALGO")


def env(name, kind, default=None):
    v = os.environ.get("E2E_" + name.upper())
    return kind(v) if v not in (None, "") else default


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", required=True, help="label: native, plugin or pass_sm")
    ap.add_argument("--out", required=True, help="folder for WORKLOAD.json")
    ap.add_argument("--workloads", default=",".join(workloads.WORKLOADS))
    ap.add_argument("--ranks", type=int, default=0, help="default: every GPU, 2 posed")
    ap.add_argument("--posed", action="store_true")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=env("seed", int, 1234))
    ap.add_argument("--timeout", type=float, default=600)
    for name in ("layers", "hidden", "heads", "seq", "batch", "vocab", "experts", "topk"):
        ap.add_argument("--" + name, type=int, default=env(name, int))
    ap.add_argument("--capacity", type=float, default=env("capacity", float, 1.25))
    ap.add_argument("--tp-reduce", choices=("fp32", "bf16"), default=env("tp_reduce", str, "fp32"))
    a = ap.parse_args(argv)
    a.workloads = [w for w in a.workloads.split(",") if w]
    unknown = [w for w in a.workloads if w not in workloads.WORKLOADS]
    if unknown or not a.workloads:
        ap.error(f"workloads: {unknown or 'none'}; known: {','.join(workloads.WORKLOADS)}")
    if a.steps < 1 or a.warmup < 0:
        ap.error("--steps 1 or more, --warmup 0 or more")
    return a


def model_config(a):
    base = POSED if a.posed else FULL
    hidden = a.hidden or base.hidden
    heads = a.heads or max(1, hidden // 128)
    cfg = Config(vocab=a.vocab or base.vocab, hidden=hidden, heads=heads,
                 layers=a.layers or base.layers, seq=a.seq or base.seq,
                 batch=a.batch or base.batch)
    if cfg.hidden % cfg.heads:
        raise SystemExit(f"train.py: hidden {cfg.hidden} does not divide into {cfg.heads} heads")
    return cfg


def nccl_version():
    v = torch.cuda.nccl.version()
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def replicas_agree(params, world):
    """Whether every rank holds the same `params`: each parameter's sum and
    sum of magnitudes in fp64, gathered from every rank and compared
    exactly.  A gradient all_reduce that gave ranks different sums leaves
    ranks that differ here."""
    with torch.no_grad():
        mine = torch.stack([torch.stack([p.double().sum(), p.double().abs().sum()])
                            for p in params]).reshape(-1)
        every = torch.empty(world, mine.numel(), dtype=mine.dtype, device=mine.device)
        dist.all_gather_into_tensor(every, mine)
        return bool((every == every[0]).all())


def run_workload(name, cfg, a, rank, world, device):
    opts = {"tp_reduce_dtype": torch.float32 if a.tp_reduce == "fp32" else torch.bfloat16,
            "experts_per_rank": a.experts or 2, "topk": a.topk or 2,
            "capacity_factor": a.capacity}
    torch.cuda.reset_peak_memory_stats(device)
    w = workloads.build(name, cfg, device, a.seed, opts)
    batches = synthetic_batches(cfg, workloads.data_seed(name, a.seed, rank), BATCHES, device)
    losses, times = [], []
    dist.barrier()
    torch.cuda.synchronize(device)
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        losses.append(w.step(*batches[i % BATCHES]))
        torch.cuda.synchronize(device)
        times.append((time.perf_counter() - t0) * 1e3)
    # In fp64 the sum of the ranks' fp32 losses is exact in any order.
    mean_loss = torch.stack(losses).double()
    dist.all_reduce(mean_loss)
    mean_loss /= world
    slowest = torch.tensor(times, device=device, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    agree = replicas_agree(w.replicated, world) if w.replicated is not None else None
    slowest = slowest.tolist()
    result = {
        "workload": name, "mode": a.mode, "ranks": world, "posed": a.posed,
        "gpus": 1 if a.posed else world,
        "nccl_version": nccl_version(), "torch_version": torch.__version__,
        "config": dict(cfg.as_dict(), **{k: (str(v) if isinstance(v, torch.dtype) else v)
                                          for k, v in opts.items()}),
        "warmup": a.warmup, "losses": mean_loss.tolist(),
        "warmup_ms": slowest[:a.warmup], "step_ms": slowest[a.warmup:],
        "replicas_agree": agree,
        "peak_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2),
        "env": {k: os.environ[k] for k in ROUTE_VARS if k in os.environ},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    del w, batches, losses
    gc.collect()
    torch.cuda.empty_cache()
    return result


def write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def rank_main(rank, world, port, a):
    # Whatever hangs (a collective, the plugin, NCCL), the rank ends here.
    signal.alarm(max(1, int(a.timeout)))
    if a.posed:
        os.environ["NCCL_HOSTID"] = f"e2e-posed-host-{rank}"
    device = torch.device("cuda", 0 if a.posed else rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, device_id=device,
                            timeout=datetime.timedelta(seconds=a.timeout))
    cfg = model_config(a)
    for name in a.workloads:
        try:
            r = run_workload(name, cfg, a, rank, world, device)
        except Exception as e:
            if rank == 0:
                write(os.path.join(a.out, name + ".json"),
                      {"workload": name, "mode": a.mode, "error": f"{type(e).__name__}: {e}"})
            traceback.print_exc()
            raise
        if rank == 0:
            write(os.path.join(a.out, name + ".json"), r)
            ms = sorted(r["step_ms"])
            print(f"e2e {a.mode} {name} on {r['gpus']} GPU(s), {world} ranks: step "
                  f"{ms[len(ms) // 2]:.1f} ms (median of {len(ms)}), loss "
                  f"{r['losses'][0]:.6f} -> {r['losses'][-1]:.6f}, replicas agree: "
                  f"{r['replicas_agree']}, peak {r['peak_gib']} GiB", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    a = parse(argv)
    visible = torch.cuda.device_count()
    world = a.ranks or (2 if a.posed else visible)
    if a.posed and visible < 1:
        sys.exit("train.py --posed: no GPU visible")
    if not a.posed and not 2 <= world <= visible:
        sys.exit(f"train.py: {world} ranks asked, {visible} GPU(s) visible; 2 or more, one "
                 "per GPU (--posed: ranks sharing one GPU)")
    model_config(a)
    os.makedirs(a.out, exist_ok=True)
    try:
        mp.spawn(rank_main, args=(world, free_port(), a), nprocs=world, join=True)
    except Exception as e:   # a rank failed or was ended: the others are ended too
        print(f"e2e {a.mode}: FAILED: {e}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
