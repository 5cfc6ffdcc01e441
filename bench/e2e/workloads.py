"""The four training workloads, each a model, its optimizer and one
training step, built on the process group of train.py:
  ddp   the decoder, DistributedDataParallel (25 MiB gradient buckets);
  fsdp  the same decoder, FSDP2 fully_shard per block and at the root,
        bf16 parameters, fp32 gradient reduction;
  tp    Megatron-style tensor parallelism over all ranks (tp.py);
  moe   dense attention and mixture-of-experts feed-forward layers with
        expert parallelism (moe.py), the other gradients all_reduced.
Every step runs under bf16 autocast."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT, dense_block
from moe import is_expert, moe_block_maker
from tp import tp_block_maker

WORKLOADS = ("ddp", "fsdp", "tp", "moe")
LR, BETAS = 3e-4, (0.9, 0.95)
BUCKET_BYTES = 25 << 20     # as DDP's default bucket_cap_mb


class Workload:
    """model(idx, targets) gives the loss; `replicated` lists the
    parameters every rank must hold bit for bit alike after a step (None:
    no such check for this workload)."""

    def __init__(self, model, opt, replicated=None, after_backward=None):
        self.model, self.opt = model, opt
        self.replicated = replicated
        self.after_backward = after_backward

    def step(self, idx, targets):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.model(idx, targets)
        loss.backward()
        if self.after_backward:
            self.after_backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss.detach()


def _gen(device, seed):
    return torch.Generator(device=device).manual_seed(seed)


def _fully_shard():
    """FSDP2's entry points, imported where used."""
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:     # PyTorch before 2.6
        from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
    return fully_shard, MixedPrecisionPolicy


def _ddp(cfg, device, seed, opts):
    with torch.device(device):
        model = GPT(cfg, dense_block, _gen(device, seed))
    ddp = DDP(model, device_ids=[device.index], bucket_cap_mb=BUCKET_BYTES >> 20)
    opt = torch.optim.AdamW(ddp.parameters(), lr=LR, betas=BETAS, weight_decay=0.0, fused=True)
    return Workload(ddp, opt, replicated=list(model.parameters()))


def _fsdp(cfg, device, seed, opts):
    from torch.distributed.device_mesh import init_device_mesh

    fully_shard, MixedPrecisionPolicy = _fully_shard()
    with torch.device(device):
        model = GPT(cfg, dense_block, _gen(device, seed))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    # One mesh over the world for every call: a 1-D mesh of all ranks uses
    # the default process group, so no other communicator is made.
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, weight_decay=0.0)
    return Workload(model, opt)


def _tp(cfg, device, seed, opts):
    group = dist.group.WORLD
    # The shards differ per rank; norms, embeddings and output layer alike.
    shard_gen = _gen(device, seed + 1 + dist.get_rank())
    make = tp_block_maker(group, opts["tp_reduce_dtype"], shard_gen)
    with torch.device(device):
        model = GPT(cfg, make, _gen(device, seed))
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, weight_decay=0.0, fused=True)
    return Workload(model, opt)


def allreduce_mean(params, world):
    """DDP's job done after the backward pass: the mean gradient of
    `params` over the ranks, in fp32 buckets of BUCKET_BYTES."""
    grads = [p.grad for p in params if p.grad is not None]
    i = 0
    while i < len(grads):
        size, j = 0, i
        while j < len(grads) and (j == i or size + grads[j].numel() * 4 <= BUCKET_BYTES):
            size += grads[j].numel() * 4
            j += 1
        flat = torch.cat([g.reshape(-1).float() for g in grads[i:j]])
        dist.all_reduce(flat)
        flat /= world
        off = 0
        for g in grads[i:j]:
            g.copy_(flat[off:off + g.numel()].view_as(g))
            off += g.numel()
        i = j


def _moe(cfg, device, seed, opts):
    world = dist.get_world_size()
    expert_gen = _gen(device, seed + 1 + dist.get_rank())
    make = moe_block_maker(dist.group.WORLD, opts["experts_per_rank"], opts["topk"],
                           opts["capacity_factor"], expert_gen)
    with torch.device(device):
        model = GPT(cfg, make, _gen(device, seed))
    dense = [p for p in model.parameters() if not is_expert(p)]
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, weight_decay=0.0, fused=True)
    return Workload(model, opt, replicated=dense, after_backward=lambda: allreduce_mean(dense, world))


BUILDERS = {"ddp": _ddp, "fsdp": _fsdp, "tp": _tp, "moe": _moe}


def build(name, cfg, device, seed, opts):
    return BUILDERS[name](cfg, device, seed, opts)


def data_seed(name, seed, rank):
    """Tensor parallel ranks train on the same sequences; the others each
    on their own."""
    return seed if name == "tp" else seed + 1000 * (rank + 1)
