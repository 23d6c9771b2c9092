"""weights: seeded-random weights at the arena's shapes, or a safetensors
checkpoint with the Llama / Mixtral tensor names; both end in the engine's
fused layout:

    embed (V,H), lm_head (V,H) (may be the embed tensor), final_norm (H)
    per layer: attn_norm (H), qkv (Hq*D + 2*Hkv*D, H) [q; k; v], o (H, Hq*D),
               mlp_norm (H), and either gate_up (2I, H) [gate; up], down (H, I)
               or router (E, H), w13 (E, 2I, H) [gate; up], w2 (E, H, I);
               an msa model's indexer index (Hi*Di + Di, H) [wq; wk] (seeded
               weights only).

Random weights are deterministic per (weights_seed, Llama tensor name, device
type): each Llama-named tensor draws from its own generator seeded by
SHA-256 of the two, N(0,1) scaled by 1/sqrt(fan_in) for projections, N(0,1)
for the embedding (unit-variance residual stream), ones for norms. With
normalized inputs to every projection the residual stream grows only like
sqrt(layers), so activations stay finite at any depth.
"""

import hashlib
import os

import torch

from .. import stio
from ..wire import Failure, plain_error


def _load_error(msg):
    return Failure(plain_error("load_error", "CheckpointError", msg))


class Layer:
    __slots__ = ("attn_norm", "qkv", "o", "mlp_norm", "gate_up", "down", "router", "w13", "w2", "experts", "index")

    def __init__(self):
        for k in self.__slots__:
            setattr(self, k, None)


class Weights:
    def __init__(self):
        self.embed = self.lm_head = self.final_norm = None
        self.layers = []

    def params(self):
        n = self.embed.numel() + self.final_norm.numel()
        if self.lm_head is not self.embed:
            n += self.lm_head.numel()
        for ly in self.layers:
            for k in ("attn_norm", "qkv", "o", "mlp_norm", "gate_up", "down", "router", "w13", "w2", "index"):
                t = getattr(ly, k)
                if t is not None:
                    n += t.numel()
        return n


def _seed(base, name):
    h = hashlib.sha256(("cacheon.weights.v1/%d/%s" % (base, name)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


class _Random:
    def __init__(self, seed, device, dtype):
        self.seed, self.device, self.dtype = seed, device, dtype

    def normal(self, name, shape, scale):
        g = torch.Generator(device=self.device)
        g.manual_seed(_seed(self.seed, name))
        t = torch.randn(shape, generator=g, device=self.device, dtype=torch.float32)
        if scale != 1.0:
            t.mul_(scale)
        return t.to(self.dtype)

    def ones(self, shape):
        return torch.ones(shape, device=self.device, dtype=self.dtype)


def random_weights(cfg, device, dtype):
    r = _Random(cfg.weights_seed, device, dtype)
    h, v, d = cfg.hidden_size, cfg.vocab_size, cfg.head_dim
    i = cfg.intermediate_size
    w = Weights()
    w.embed = r.normal("model.embed_tokens.weight", (v, h), 1.0)
    w.lm_head = w.embed if cfg.tie_word_embeddings else r.normal("lm_head.weight", (v, h), h ** -0.5)
    w.final_norm = r.ones((h,))
    for li in range(cfg.num_layers):
        p = "model.layers.%d." % li
        ly = Layer()
        ly.attn_norm = r.ones((h,))
        ly.mlp_norm = r.ones((h,))
        ly.qkv = torch.cat([r.normal(p + "self_attn.q_proj.weight", (cfg.q_dim, h), h ** -0.5),
                            r.normal(p + "self_attn.k_proj.weight", (cfg.kv_dim, h), h ** -0.5),
                            r.normal(p + "self_attn.v_proj.weight", (cfg.kv_dim, h), h ** -0.5)])
        ly.o = r.normal(p + "self_attn.o_proj.weight", (h, cfg.q_dim), cfg.q_dim ** -0.5)
        if cfg.kind == "msa":
            ly.index = torch.cat([r.normal(p + "self_attn.indexer.wq.weight",
                                           (cfg.index_heads * cfg.index_head_dim, h), h ** -0.5),
                                  r.normal(p + "self_attn.indexer.wk.weight", (cfg.index_head_dim, h), h ** -0.5)])
        if cfg.kind == "mixtral":
            q = p + "block_sparse_moe."
            ly.router = r.normal(q + "gate.weight", (cfg.num_experts, h), h ** -0.5)
            ly.w13 = torch.stack([torch.cat([r.normal(q + "experts.%d.w1.weight" % e, (i, h), h ** -0.5),
                                             r.normal(q + "experts.%d.w3.weight" % e, (i, h), h ** -0.5)])
                                  for e in range(cfg.num_experts)])
            ly.w2 = torch.stack([r.normal(q + "experts.%d.w2.weight" % e, (h, i), i ** -0.5)
                                 for e in range(cfg.num_experts)])
        else:
            ly.gate_up = torch.cat([r.normal(p + "mlp.gate_proj.weight", (i, h), h ** -0.5),
                                    r.normal(p + "mlp.up_proj.weight", (i, h), h ** -0.5)])
            ly.down = r.normal(p + "mlp.down_proj.weight", (h, i), i ** -0.5)
        w.layers.append(ly)
    return w


# ---------------------------------------------------------------------------
# Tensor parallel


def check_tp(cfg, world):
    """The reason the model cannot be split over world ranks, or ''."""
    if world == 1:
        return ""
    if cfg.kind == "msa":
        return "an msa model runs on one rank"
    for what, n in (("num_heads", cfg.num_heads), ("num_kv_heads", cfg.num_kv_heads),
                    ("intermediate_size", cfg.intermediate_size)):
        if n % world:
            return "model.%s = %d is not a multiple of the %d ranks" % (what, n, world)
    return ""


def shard(cfg, w, rank, world):
    """This rank's tensor-parallel shard of the full weights, in place of
    them: attention by heads (q heads r*Hq/W.., the matching kv heads; o by
    the same columns), the MLP by intermediate columns (gate_up's rows
    [gate shard; up shard], down's columns), each expert alike (w13
    [gate shard; up shard], w2's columns, as ShardMoEWeights cuts them for
    moe.fused_experts_reduce). Embedding, norms, router and lm_head stay
    whole (replicated). Every rank draws or loads the full weights first,
    so the shards of W ranks are exactly the one-rank engine's weights."""
    if world == 1:
        return w
    d, i = cfg.head_dim, cfg.intermediate_size
    hq, hkv, iw = cfg.num_heads // world, cfg.num_kv_heads // world, i // world

    def rows(t, lo, n):
        return t[lo:lo + n]

    def halves(t, axis_rows):
        # [gate; up] along dim -2 (rows): this rank's rows of each half
        return torch.cat([t.narrow(axis_rows, rank * iw, iw), t.narrow(axis_rows, i + rank * iw, iw)],
                         dim=axis_rows).contiguous()

    qd, kd = cfg.q_dim, cfg.kv_dim
    for ly in w.layers:
        q = rows(ly.qkv, rank * hq * d, hq * d)
        k = rows(ly.qkv, qd + rank * hkv * d, hkv * d)
        v = rows(ly.qkv, qd + kd + rank * hkv * d, hkv * d)
        ly.qkv = torch.cat([q, k, v]).contiguous()
        ly.o = ly.o[:, rank * hq * d:(rank + 1) * hq * d].contiguous()
        if ly.w13 is not None:
            ly.w13 = halves(ly.w13, 1)
            ly.w2 = ly.w2[:, :, rank * iw:(rank + 1) * iw].contiguous()
        else:
            ly.gate_up = halves(ly.gate_up, 0)
            ly.down = ly.down[:, rank * iw:(rank + 1) * iw].contiguous()
    return w


# ---------------------------------------------------------------------------
# Checkpoints


def _read_checkpoint(path):
    if not os.path.isabs(path):
        raise _load_error("checkpoint %r must be an absolute path" % path)
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".safetensors"))
        if not files:
            raise _load_error("checkpoint directory %s holds no .safetensors file" % path)
    else:
        files = [path]
    tensors = {}
    for f in files:
        try:
            t, _meta = stio.load(f)
        except (OSError, ValueError) as e:
            raise _load_error("reading %s: %s" % (f, e))
        for k in t:
            if k in tensors:
                raise _load_error("tensor %s appears in more than one checkpoint file" % k)
        tensors.update(t)
    return tensors


def load_checkpoint(cfg, path, device, dtype):
    if cfg.kind == "msa":
        raise _load_error("an msa model runs on seeded weights only (no checkpoint names its indexer)")
    src = _read_checkpoint(path)
    used = set()

    def take(name, shape):
        t = src.get(name)
        if t is None:
            raise _load_error("checkpoint lacks %s" % name)
        if list(t.shape) != list(shape):
            raise _load_error("checkpoint %s has shape %s, the arena wants %s" % (name, list(t.shape), list(shape)))
        used.add(name)
        return t.to(device=device, dtype=dtype)

    h, v, i = cfg.hidden_size, cfg.vocab_size, cfg.intermediate_size
    w = Weights()
    w.embed = take("model.embed_tokens.weight", (v, h))
    w.lm_head = take("lm_head.weight", (v, h)) if "lm_head.weight" in src else w.embed
    w.final_norm = take("model.norm.weight", (h,))
    for li in range(cfg.num_layers):
        p = "model.layers.%d." % li
        ly = Layer()
        ly.attn_norm = take(p + "input_layernorm.weight", (h,))
        ly.mlp_norm = take(p + "post_attention_layernorm.weight", (h,))
        ly.qkv = torch.cat([take(p + "self_attn.q_proj.weight", (cfg.q_dim, h)),
                            take(p + "self_attn.k_proj.weight", (cfg.kv_dim, h)),
                            take(p + "self_attn.v_proj.weight", (cfg.kv_dim, h))])
        ly.o = take(p + "self_attn.o_proj.weight", (h, cfg.q_dim))
        if cfg.kind == "mixtral":
            q = p + "block_sparse_moe."
            ly.router = take(q + "gate.weight", (cfg.num_experts, h))
            ly.w13 = torch.stack([torch.cat([take(q + "experts.%d.w1.weight" % e, (i, h)),
                                             take(q + "experts.%d.w3.weight" % e, (i, h))])
                                  for e in range(cfg.num_experts)])
            ly.w2 = torch.stack([take(q + "experts.%d.w2.weight" % e, (h, i)) for e in range(cfg.num_experts)])
        else:
            ly.gate_up = torch.cat([take(p + "mlp.gate_proj.weight", (i, h)),
                                    take(p + "mlp.up_proj.weight", (i, h))])
            ly.down = take(p + "mlp.down_proj.weight", (h, i))
        w.layers.append(ly)
    extra = sorted(k for k in src if k not in used and "rotary_emb" not in k)
    if any(k.startswith("model.layers.%d." % cfg.num_layers) for k in extra):
        raise _load_error("checkpoint has more than the arena's %d layers" % cfg.num_layers)
    return w


def hf_state_dict(cfg, w):
    """The weights under Llama / Mixtral names (views of the fused tensors)."""
    out = {"model.embed_tokens.weight": w.embed, "model.norm.weight": w.final_norm}
    if w.lm_head is not w.embed:
        out["lm_head.weight"] = w.lm_head
    qd, kd, i = cfg.q_dim, cfg.kv_dim, cfg.intermediate_size
    for li, ly in enumerate(w.layers):
        p = "model.layers.%d." % li
        out[p + "input_layernorm.weight"] = ly.attn_norm
        out[p + "post_attention_layernorm.weight"] = ly.mlp_norm
        out[p + "self_attn.q_proj.weight"] = ly.qkv[:qd]
        out[p + "self_attn.k_proj.weight"] = ly.qkv[qd:qd + kd]
        out[p + "self_attn.v_proj.weight"] = ly.qkv[qd + kd:]
        out[p + "self_attn.o_proj.weight"] = ly.o
        if ly.index is not None:
            iq = cfg.index_heads * cfg.index_head_dim
            out[p + "self_attn.indexer.wq.weight"] = ly.index[:iq]
            out[p + "self_attn.indexer.wk.weight"] = ly.index[iq:]
        if cfg.kind == "mixtral":
            q = p + "block_sparse_moe."
            out[q + "gate.weight"] = ly.router
            for e in range(cfg.num_experts):
                out[q + "experts.%d.w1.weight" % e] = ly.w13[e, :i]
                out[q + "experts.%d.w3.weight" % e] = ly.w13[e, i:]
                out[q + "experts.%d.w2.weight" % e] = ly.w2[e]
        else:
            out[p + "mlp.gate_proj.weight"] = ly.gate_up[:i]
            out[p + "mlp.up_proj.weight"] = ly.gate_up[i:]
            out[p + "mlp.down_proj.weight"] = ly.down
    return out
