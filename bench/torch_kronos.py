"""The Kronos tokenizer and predictor in train mode, written in PyTorch for the training-step
benchmark (bench/finetune_step.py): the baseline kronos's C training core is timed against.

Written for the benchmark from the architecture as docs/finetune.md and the golden training
fixtures (../shared/golden/train/README.md) describe it, not copied from the official code;
`check_golden` shows it computes the same losses and gradients as those fixtures before
anything is timed. Runs on Debian's python3-torch 1.13 (no scaled_dot_product_attention:
attention is written out, causal masks top-left aligned).

Parameter names are the official checkpoints' (model.safetensors loads with strict names).
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python",
                                "tests"))
import safetensors_np  # noqa: E402  (the repository's numpy reader of .safetensors)


# ---------------------------------------------------------------- building blocks

class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Rotary(nn.Module):
    """RoPE on the two halves of each head (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""

    def __init__(self, head_dim):
        super().__init__()
        self.register_buffer(
            "inv_freq", 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)))

    def forward(self, x):  # x: [B, H, T, hd]
        t = torch.arange(x.shape[-2], dtype=self.inv_freq.dtype)
        ang = torch.outer(t, self.inv_freq)
        ang = torch.cat([ang, ang], -1)
        cos, sin = ang.cos(), ang.sin()
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin


def attend(q, k, v, causal, dropout_p, training):
    """softmax(q kᵀ / sqrt(hd) + mask) v, the mask top-left aligned."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        tq, tk = s.shape[-2], s.shape[-1]
        mask = torch.ones(tq, tk, dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
    p = s.softmax(-1)
    if dropout_p > 0 and training:
        p = F.dropout(p, dropout_p)
    return p @ v


class Attention(nn.Module):
    def __init__(self, d, heads, attn_p=0.0, resid_p=0.0):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)
        self.rotary = Rotary(self.hd)
        self.attn_p, self.resid = attn_p, nn.Dropout(resid_p)

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.hd).transpose(1, 2)

    def forward(self, query, key, causal):
        q = self.rotary(self.split(self.q_proj(query)))
        k = self.rotary(self.split(self.k_proj(key)))
        v = self.split(self.v_proj(key))
        o = attend(q, k, v, causal, self.attn_p, self.training)
        b, _, t, _ = o.shape
        return self.resid(self.out_proj(o.transpose(1, 2).reshape(b, t, -1)))


class Block(nn.Module):
    def __init__(self, d, heads, ff, ffn_p=0.0, attn_p=0.0, resid_p=0.0):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.self_attn = Attention(d, heads, attn_p, resid_p)
        self.ffn = nn.Module()
        self.ffn.w1 = nn.Linear(d, ff, bias=False)
        self.ffn.w3 = nn.Linear(d, ff, bias=False)
        self.ffn.w2 = nn.Linear(ff, d, bias=False)
        self.ffn_drop = nn.Dropout(ffn_p)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.self_attn(h, h, causal=True)
        h = self.norm2(x)
        return x + self.ffn_drop(self.ffn.w2(F.silu(self.ffn.w1(h)) * self.ffn.w3(h)))


# ---------------------------------------------------------------- the tokenizer

class Tokenizer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, self.c = c["d_model"], c
        self.s1_bits, self.bits = c["s1_bits"], c["s1_bits"] + c["s2_bits"]
        drops = (c.get("ffn_dropout_p", 0.0), c.get("attn_dropout_p", 0.0),
                 c.get("resid_dropout_p", 0.0))
        self.embed = nn.Linear(c["d_in"], d)
        self.encoder = nn.ModuleList(Block(d, c["n_heads"], c["ff_dim"], *drops)
                                     for _ in range(c["n_enc_layers"] - 1))
        self.decoder = nn.ModuleList(Block(d, c["n_heads"], c["ff_dim"], *drops)
                                     for _ in range(c["n_dec_layers"] - 1))
        self.quant_embed = nn.Linear(d, self.bits)
        self.post_quant_embed_pre = nn.Linear(self.s1_bits, d)
        self.post_quant_embed = nn.Linear(self.bits, d)
        self.head = nn.Linear(d, c["d_in"])

    def bsq_loss(self, z, zq):
        """Commitment + zeta * (gamma0 * per-sample soft entropy - gamma * codebook entropy).

        Both entropies come from the per-bit probabilities p = sigmoid(-4 z / sqrt(bits)): the
        reference's analytical per-sample branch replaces the group softmax it computed first,
        so its "codebook" entropy is that of each bit's mean probability over all positions,
        summed over the bits (its group_size never enters the loss)."""
        c, bits = self.c, self.bits
        commit = c["beta"] * ((zq.detach() - z) ** 2).sum(-1).mean()
        p = torch.sigmoid(-4 * z / math.sqrt(bits))
        pp = torch.stack([p, 1 - p], -1)  # [..., bits, 2]
        per_sample = (-(pp * torch.log(pp + 1e-8)).sum(-1)).sum(-1).mean()
        avg = pp.reshape(-1, bits, 2).mean(0)
        cb = (-(avg * torch.log(avg + 1e-8)).sum(-1)).sum()
        return commit + c["zeta"] * (c["gamma0"] * per_sample - c["gamma"] * cb)

    def forward(self, x):
        h = self.embed(x)
        for blk in self.encoder:
            h = blk(h)
        z = F.normalize(self.quant_embed(h), dim=-1)
        zhat = torch.where(z > 0, torch.ones_like(z), -torch.ones_like(z))
        zq = (z + (zhat - z).detach()) / math.sqrt(self.bits)  # straight-through
        bsq = self.bsq_loss(z, zq)
        z_pre = self.post_quant_embed_pre(zq[..., :self.s1_bits])
        z_all = self.post_quant_embed(zq)
        for blk in self.decoder:
            z_pre = blk(z_pre)
        for blk in self.decoder:
            z_all = blk(z_all)
        return self.head(z_pre), self.head(z_all), bsq

    @torch.no_grad()
    def encode_half(self, x):
        h = self.embed(x)
        for blk in self.encoder:
            h = blk(h)
        bits = (self.quant_embed(h) > 0).long()
        w = 2 ** torch.arange(self.s1_bits)
        return (bits[..., :self.s1_bits] * w).sum(-1), (bits[..., self.s1_bits:] * w).sum(-1)

    def losses(self, x):
        z_pre, z, bsq = self(x)
        recon_pre, recon = F.mse_loss(z_pre, x), F.mse_loss(z, x)
        return (recon_pre + recon + bsq) / 2, dict(recon_pre=recon_pre, recon=recon, bsq=bsq)


# ---------------------------------------------------------------- the predictor

def sinusoid(rows, d):
    pos = torch.arange(rows).float().unsqueeze(1)
    div = (torch.arange(0, d, 2).float() * -(math.log(10000.0) / d)).exp()
    w = torch.zeros(rows, d)
    w[:, 0::2], w[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return w


class Predictor(nn.Module):
    TIME = (("minute", 60), ("hour", 24), ("weekday", 7), ("day", 32), ("month", 13))

    def __init__(self, c):
        super().__init__()
        d, self.d = c["d_model"], c["d_model"]
        v1, v2 = 2 ** c["s1_bits"], 2 ** c["s2_bits"]
        drops = (c.get("ffn_dropout_p", 0.0), c.get("attn_dropout_p", 0.0),
                 c.get("resid_dropout_p", 0.0))
        self.embedding = nn.Module()
        self.embedding.emb_s1 = nn.Embedding(v1, d)
        self.embedding.emb_s2 = nn.Embedding(v2, d)
        self.embedding.fusion_proj = nn.Linear(2 * d, d)
        self.time_emb = nn.Module()
        self.learn_te = c["learn_te"]
        for name, rows in self.TIME:
            e = nn.Embedding(rows, d)
            if self.learn_te:
                setattr(self.time_emb, f"{name}_embed", e)
            else:  # the fixed sinusoid, as ...emb.weight, never trained
                holder = nn.Module()
                holder.emb = e
                e.weight = nn.Parameter(sinusoid(rows, d), requires_grad=False)
                setattr(self.time_emb, f"{name}_embed", holder)
        self.token_drop = nn.Dropout(c.get("token_dropout_p", 0.0))
        self.transformer = nn.ModuleList(Block(d, c["n_heads"], c["ff_dim"], *drops)
                                         for _ in range(c["n_layers"]))
        self.norm = RMSNorm(d)
        self.dep_layer = nn.Module()
        self.dep_layer.cross_attn = Attention(d, 4, drops[1], drops[2])
        self.dep_layer.norm = RMSNorm(d)
        self.head = nn.Module()
        self.head.proj_s1 = nn.Linear(d, v1)
        self.head.proj_s2 = nn.Linear(d, v2)

    def time(self, stamp):
        total = 0
        for i, (name, _) in enumerate(self.TIME):
            m = getattr(self.time_emb, f"{name}_embed")
            e = m if self.learn_te else m.emb
            total = total + e(stamp[..., i].long())
        return total

    def trunk(self, s1, s2, stamp):
        """Embeddings, blocks and the final norm: the context every head reads."""
        emb = self.embedding
        x = emb.fusion_proj(torch.cat([emb.emb_s1(s1) * math.sqrt(self.d),
                                       emb.emb_s2(s2) * math.sqrt(self.d)], -1))
        x = self.token_drop(x + self.time(stamp))
        for blk in self.transformer:
            x = blk(x)
        return self.norm(x)

    def s2_head(self, x, sampled_s1, causal_dep=True):
        sib = self.embedding.emb_s1(sampled_s1)
        x2 = self.dep_layer.norm(x + self.dep_layer.cross_attn(sib, x, causal=causal_dep))
        return self.head.proj_s2(x2)

    def forward(self, s1, s2, stamp, sampled_s1, causal_dep=True):
        """Train mode: s2 conditioned on emb_s1(sampled_s1); the dependency layer's attention is
        causal (training), or not (causal_dep=False: the official model.eval() variant)."""
        x = self.trunk(s1, s2, stamp)
        return self.head.proj_s1(x), self.s2_head(x, sampled_s1, causal_dep)

    def forward_sampled(self, s1, s2, stamp):
        """The official training forward: s1 ids drawn from softmax(s1_logits.detach())."""
        x = self.trunk(s1, s2, stamp)
        l1 = self.head.proj_s1(x)
        probs = l1.detach().softmax(-1).reshape(-1, l1.shape[-1])
        sampled = torch.multinomial(probs, 1).view(s1.shape)
        return l1, self.s2_head(x, sampled)

    def losses(self, ids1, ids2, stamp, sampled_s1):
        l1, l2 = self(ids1[:, :-1], ids2[:, :-1], stamp[:, :-1], sampled_s1)
        ce1 = F.cross_entropy(l1.reshape(-1, l1.shape[-1]), ids1[:, 1:].reshape(-1))
        ce2 = F.cross_entropy(l2.reshape(-1, l2.shape[-1]), ids2[:, 1:].reshape(-1))
        return (ce1 + ce2) / 2, dict(ce_s1=ce1, ce_s2=ce2)


# ---------------------------------------------------------------- checkpoints

def load(kind, directory):
    """A Tokenizer or Predictor from an HF directory (config.json + model.safetensors)."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    model = (Tokenizer if kind == "tokenizer" else Predictor)(cfg)
    tensors = safetensors_np.load(os.path.join(directory, "model.safetensors"))
    # The checkpoint's integer buffers (tokenizer.bsq.*) are not needed by this arithmetic.
    params = dict(model.named_parameters())
    params.update(dict(model.named_buffers()))
    missing = set(params) - set(tensors)
    extra = {k for k in set(tensors) - set(params) if not k.startswith("tokenizer.bsq.")}
    if missing or extra:
        raise ValueError(f"{directory}: missing {sorted(missing)}, unexpected {sorted(extra)}")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(np.array(tensors[name])).to(p.dtype))
    return model


def fresh(kind, cfg, seed=0):
    """Randomly initialised model of a config (for timing: the values do not matter)."""
    torch.manual_seed(seed)
    model = (Tokenizer if kind == "tokenizer" else Predictor)(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2 and p.requires_grad:
                nn.init.xavier_normal_(p)
    return model


# ---------------------------------------------------------------- golden check

def check_golden(root):
    """Every golden training case's losses and gradients, within the README's tolerances.
    Returns lines describing the worst differences; raises on a mismatch."""
    lines = []
    for cfg_name in ("tiny", "odd"):
        base = os.path.join(root, cfg_name)
        for kind in ("predictor", "tokenizer"):
            model = load(kind, os.path.join(base, kind))
            model.train()
            case = safetensors_np.load(os.path.join(base, "cases", f"{kind}_step.safetensors"))
            x = torch.from_numpy(np.array(case["x"]))
            model.zero_grad()
            if kind == "predictor":
                stamp = torch.from_numpy(np.array(case["stamp"]))
                ids1 = torch.from_numpy(np.array(case["s1_ids"]))
                ids2 = torch.from_numpy(np.array(case["s2_ids"]))
                tok = load("tokenizer", os.path.join(base, "tokenizer"))
                e1, e2 = tok.encode_half(x)
                if not (torch.equal(e1, ids1) and torch.equal(e2, ids2)):
                    raise AssertionError(f"{cfg_name}: token ids differ from the fixture's")
                loss, parts = model.losses(ids1, ids2, stamp,
                                           torch.from_numpy(np.array(case["sampled_s1_ids"])))
            else:
                loss, parts = model.losses(x)
            loss.backward()
            want = float(case["loss"][0])
            rel = abs(loss.item() - want) / abs(want)
            if rel > 1e-5:
                raise AssertionError(f"{cfg_name} {kind}: loss {loss.item()} vs {want}")
            worst, worst_name, sq = 0.0, "", 0.0
            for name, p in model.named_parameters():
                g = np.array(case["grad." + name], dtype=np.float64)
                mine = (p.grad.double().numpy() if p.grad is not None else np.zeros_like(g))
                sq += float((mine ** 2).sum())
                scale = np.abs(g).max()
                err = np.abs(mine - g).max() / scale if scale > 0 else np.abs(mine).max()
                if err > worst:
                    worst, worst_name = err, name
                if err > 1e-4:
                    raise AssertionError(f"{cfg_name} {kind}: grad.{name} off by {err:.2e} of "
                                         "its largest magnitude")
            norm_rel = abs(math.sqrt(sq) - float(case["grad_norm"][0])) / float(case["grad_norm"][0])
            lines.append(f"{cfg_name} {kind}: loss rel err {rel:.1e}, worst gradient "
                         f"{worst:.1e} of max ({worst_name}), grad norm rel err {norm_rel:.1e}")
    return lines


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "golden", "train")
    torch.set_num_threads(1)
    for line in check_golden(root):
        print(line)
    print("the PyTorch model computes the golden losses and gradients")
