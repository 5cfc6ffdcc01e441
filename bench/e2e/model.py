"""The GPT-style decoder every workload trains: token and position
embeddings, pre-norm blocks (causal self-attention, then a feed-forward
part), a final norm and an untied output layer; the loss is next-token
cross entropy in fp32.  The workloads swap the blocks' parts for tensor-
parallel (tp.py) or mixture-of-experts (moe.py) ones."""
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

INIT_STD = 0.02


@dataclass(frozen=True)
class Config:
    vocab: int = 32768
    hidden: int = 2048
    heads: int = 16
    layers: int = 12
    seq: int = 2048
    batch: int = 1          # sequences per rank and step

    @property
    def ffn(self):
        return 4 * self.hidden

    def as_dict(self):
        return asdict(self)


def init_(t, gen):
    """Normal(0, INIT_STD) from `gen`, so every rank and every run that
    seeds it alike starts from the same values."""
    with torch.no_grad():
        t.normal_(0.0, INIT_STD, generator=gen)


class Attention(nn.Module):
    """Causal self-attention over `heads` heads of `head_dim`; the qkv
    and output layers may be replaced (tensor parallelism)."""

    def __init__(self, qkv, proj, heads, head_dim):
        super().__init__()
        self.qkv, self.proj = qkv, proj
        self.heads, self.head_dim = heads, head_dim

    def forward(self, x):
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, fc1, fc2):
        super().__init__()
        self.fc1, self.fc2 = fc1, fc2

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, hidden, attn, ffn):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(hidden), attn
        self.ln2, self.ffn = nn.LayerNorm(hidden), ffn

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


def _linear(n_in, n_out, gen):
    lin = nn.Linear(n_in, n_out)
    init_(lin.weight, gen)
    nn.init.zeros_(lin.bias)
    return lin


def dense_attention(cfg, gen):
    return Attention(_linear(cfg.hidden, 3 * cfg.hidden, gen), _linear(cfg.hidden, cfg.hidden, gen),
                     cfg.heads, cfg.hidden // cfg.heads)


def dense_block(cfg, gen):
    """A plain block, every weight drawn from `gen`."""
    mlp = MLP(_linear(cfg.hidden, cfg.ffn, gen), _linear(cfg.ffn, cfg.hidden, gen))
    return Block(cfg.hidden, dense_attention(cfg, gen), mlp)


class GPT(nn.Module):
    """make_block(cfg, gen) builds each block; gen draws the embeddings and
    the output layer (the same on every rank for the same seed)."""

    def __init__(self, cfg, make_block, gen):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.hidden)
        self.pos = nn.Embedding(cfg.seq, cfg.hidden)
        self.blocks = nn.ModuleList(make_block(cfg, gen) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.hidden)
        self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        for t in (self.tok.weight, self.pos.weight, self.head.weight):
            init_(t, gen)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def synthetic_batches(cfg, seed, count, device):
    """`count` (input, target) batches of arithmetic token sequences with
    10 % noise: learnable, so the loss falls and its curve means something.
    Drawn on the CPU from `seed` alone: the same in every run."""
    g = torch.Generator().manual_seed(seed)
    shape = (count, cfg.batch, 1)
    start = torch.randint(0, cfg.vocab, shape, generator=g)
    stride = torch.randint(1, 17, shape, generator=g)
    tok = (start + stride * torch.arange(cfg.seq + 1)) % cfg.vocab
    noise = torch.randint(0, cfg.vocab, tok.shape, generator=g)
    tok = torch.where(torch.rand(tok.shape, generator=g) < 0.1, noise, tok)
    return [(tok[i, :, :-1].contiguous().to(device), tok[i, :, 1:].contiguous().to(device))
            for i in range(count)]
