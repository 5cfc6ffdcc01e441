"""Megatron-style tensor parallelism over a process group: column-parallel
layers split their outputs among the ranks, row-parallel layers their
inputs.  The all_reduce sits in the forward pass of each row-parallel
layer and in the backward pass of each column-parallel one, so every
block puts two all_reduces of batch x seq x hidden on the critical path
each way."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from model import MLP, Attention, Block, init_


def all_reduce(t, group, dtype):
    """The sum over the group of `t`, summed in `dtype`, returned in t's."""
    buf = t.to(dtype, copy=True).contiguous()
    dist.all_reduce(buf, group=group)
    return buf.to(t.dtype)


class _CopyToRanks(torch.autograd.Function):
    """Identity forward; all_reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group, dtype):
        ctx.group, ctx.dtype = group, dtype
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return all_reduce(grad, ctx.group, ctx.dtype), None, None


class _ReduceFromRanks(torch.autograd.Function):
    """all_reduce forward; identity backward."""

    @staticmethod
    def forward(ctx, x, group, dtype):
        return all_reduce(x, group, dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


class ColumnParallelLinear(nn.Module):
    """y[:, this rank's share of the outputs] = x W_r^T + b_r."""

    def __init__(self, n_in, n_out, group, dtype, gen):
        super().__init__()
        world = dist.get_world_size(group)
        self.group, self.dtype = group, dtype
        self.weight = nn.Parameter(torch.empty(n_out // world, n_in))
        self.bias = nn.Parameter(torch.zeros(n_out // world))
        init_(self.weight, gen)

    def forward(self, x):
        return F.linear(_CopyToRanks.apply(x, self.group, self.dtype), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """y = sum over ranks of x_r W_r^T, plus a bias every rank holds."""

    def __init__(self, n_in, n_out, group, dtype, gen):
        super().__init__()
        world = dist.get_world_size(group)
        self.group, self.dtype = group, dtype
        self.weight = nn.Parameter(torch.empty(n_out, n_in // world))
        self.bias = nn.Parameter(torch.zeros(n_out))
        init_(self.weight, gen)

    def forward(self, x):
        return _ReduceFromRanks.apply(F.linear(x, self.weight), self.group, self.dtype) + self.bias


def tp_block_maker(group, dtype, shard_gen):
    """make_block for model.GPT: each rank holds heads / world heads and
    ffn / world of the feed-forward width.  shard_gen draws the shards (a
    generator of this rank's own); the norms start alike everywhere."""
    world = dist.get_world_size(group)

    def make(cfg, _gen):
        if cfg.heads % world or cfg.ffn % world:
            raise ValueError(f"tp: {cfg.heads} heads and {cfg.ffn} ffn width do not divide "
                             f"among {world} ranks")
        head_dim = cfg.hidden // cfg.heads
        attn = Attention(ColumnParallelLinear(cfg.hidden, 3 * cfg.hidden, group, dtype, shard_gen),
                         RowParallelLinear(cfg.hidden, cfg.hidden, group, dtype, shard_gen),
                         cfg.heads // world, head_dim)
        mlp = MLP(ColumnParallelLinear(cfg.hidden, cfg.ffn, group, dtype, shard_gen),
                  RowParallelLinear(cfg.ffn, cfg.hidden, group, dtype, shard_gen))
        return Block(cfg.hidden, attn, mlp)

    return make
