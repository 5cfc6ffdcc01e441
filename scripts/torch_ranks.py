"""What the PyTorch checks (torch_allreduce.py, torch_p2p.py) share: how
many ranks to run, one process per GPU, and each one's NCCL process group."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def world_size(least=1):
    """The visible GPUs, or the first NRANKS of them; exits when that is
    fewer than `least` or NRANKS asks for more than there are."""
    visible = torch.cuda.device_count()
    world = visible
    if os.environ.get("NRANKS"):
        asked = int(os.environ["NRANKS"])
        if not least <= asked <= visible:
            need = f" ({least} or more needed)" if least > 1 else ""
            sys.exit(f"NRANKS={asked}, but {visible} GPUs are visible{need}")
        world = asked
    if world < least:
        sys.exit(f"needs {least} or more GPUs, {world} visible")
    return world


def init_rank(rank, world, port):
    """This process's GPU and its NCCL process group."""
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))


def spawn(worker, world, *args):
    """Runs worker(rank, world, port, *args, results) in one process per
    GPU; returns `results`, the dict the workers fill."""
    port = 29500 + os.getpid() % 1000
    results = mp.Manager().dict()
    mp.spawn(worker, args=(world, port, *args, results), nprocs=world)
    return results
