"""A mixture-of-experts feed-forward layer with expert parallelism: each
rank holds `local` experts, a replicated router sends every token to its
top-k experts, and two all_to_all_single calls move the tokens to the
experts' ranks and back (dispatch and combine) around the experts' GEMMs.
Each expert takes at most `capacity` tokens from each rank (the rest are
dropped, as in GShard and Switch), so every rank sends every other the
same number of bytes and no split sizes are exchanged."""
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from model import Block, dense_attention, init_


class _AllToAll(torch.autograd.Function):
    """all_to_all_single with equal splits, forward and backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = torch.empty_like(grad)
        dist.all_to_all_single(out, grad.contiguous(), group=ctx.group)
        return out, None


class MoE(nn.Module):
    def __init__(self, hidden, ffn, local, topk, capacity_factor, group, expert_gen, gen,
                 dtype=torch.bfloat16):
        super().__init__()
        self.dtype = dtype          # of the tokens on the wire and in the experts' GEMMs
        self.world = dist.get_world_size(group)
        self.group, self.local, self.topk = group, local, topk
        self.capacity_factor = capacity_factor
        self.router = nn.Linear(hidden, local * self.world, bias=False)
        init_(self.router.weight, gen)
        # Expert weights are this rank's own (is_expert: no gradient all_reduce).
        self.w1 = nn.Parameter(torch.empty(local, hidden, ffn))
        self.w2 = nn.Parameter(torch.empty(local, ffn, hidden))
        for w in (self.w1, self.w2):
            init_(w, expert_gen)
            w.is_expert = True

    def capacity(self, tokens):
        experts = self.local * self.world
        return int(math.ceil(self.capacity_factor * tokens * self.topk / experts))

    def forward(self, x):
        b, s, h = x.shape
        xt = x.reshape(b * s, h)
        tokens, experts = xt.shape[0], self.local * self.world
        cap = self.capacity(tokens)
        probs = self.router(xt).float().softmax(dim=-1)
        gate, expert = probs.topk(self.topk, dim=-1)
        gate = (gate / gate.sum(dim=-1, keepdim=True)).reshape(-1)
        expert = expert.reshape(-1)
        # Each choice's place in its expert's queue, in token order.
        place = (F.one_hot(expert, experts).cumsum(0) - 1).gather(1, expert[:, None]).squeeze(1)
        keep = place < cap
        slot = (expert * cap + place)[keep]
        token = torch.arange(tokens, device=x.device).repeat_interleave(self.topk)[keep]
        # Experts r*local .. r*local+local-1 live on rank r: the slots are
        # already in destination order.
        send = xt.new_zeros(experts * cap, h, dtype=self.dtype)
        send = send.index_add(0, slot, xt[token].to(self.dtype))
        got = _AllToAll.apply(send, self.group)
        # [source rank, local expert, slot, h] -> per expert, every source's tokens.
        got = got.view(self.world, self.local, cap, h).transpose(0, 1).reshape(
            self.local, self.world * cap, h)
        y = torch.bmm(F.gelu(torch.bmm(got, self.w1.to(got.dtype)), approximate="tanh"),
                      self.w2.to(got.dtype))
        y = y.view(self.local, self.world, cap, h).transpose(0, 1).reshape(experts * cap, h)
        back = _AllToAll.apply(y.contiguous(), self.group)
        out = torch.zeros(tokens, h, device=x.device, dtype=torch.float32)
        out = out.index_add(0, token, back[slot].float() * gate[keep, None])
        return out.view(b, s, h).to(x.dtype)


def moe_block_maker(group, local, topk, capacity_factor, expert_gen, dtype=torch.bfloat16):
    """make_block for model.GPT: dense attention, MoE feed-forward."""

    def make(cfg, gen):
        return Block(cfg.hidden, dense_attention(cfg, gen),
                     MoE(cfg.hidden, cfg.ffn, local, topk, capacity_factor, group, expert_gen, gen,
                         dtype))

    return make


def is_expert(p):
    return getattr(p, "is_expert", False)
