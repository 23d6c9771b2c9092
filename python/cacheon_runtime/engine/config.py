"""config: the arena as the engine reads it (docs/engine-protocol.md, load).

The arena arrives as JSON::

    {"name": "cpu-tiny",
     "model": {"kind": "llama", "vocab_size": 256, "hidden_size": 64, ...},
     "engine": {"page_size": 16, "max_batch": 8, "kv_pages": 0, ...},
     "dtype": "float32", "device": "cpu"}

``dtype`` and ``device`` may also sit inside ``model`` or ``engine``; other
keys (workload, policy, ...) are ignored. Integers may arrive as JSON
integers or decimal strings, reals as numbers or canonical decimal strings
("0.00001"), because canonical JSON carries no floats.
"""

import math

from ..wire import bad

def attention_scale(dim):
    """The softmax scale the engine passes for a head (or index head) of
    dim channels: 1/sqrt(dim), two correctly rounded IEEE operations, the
    very bits verify serves (Go's slot scalar rsqrt(D), 1 / math.Sqrt(D)).
    dim ** -0.5 is pow's rounding and differs from it by one ulp at 32 and
    128, a difference a kernel could key on (sdpa_scale_bits_tell)."""
    return 1.0 / math.sqrt(dim)


# MAX_MSA_TOPK is the most blocks an msa model's queries select: the K
# of verify's block-score grading (Go: arena.MaxMSATopK, which
# TestMaxMSATopK keeps equal to this).
MAX_MSA_TOPK = 8

KINDS = {"llama": "llama", "dense": "llama", "mixtral": "mixtral", "moe": "mixtral", "msa": "msa"}
DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
          "half": "float16", "float32": "float32", "fp32": "float32", "float": "float32"}


def _int(sec, key, default=None, lo=0, hi=1 << 40, where="model"):
    v = sec.get(key, default)
    if v is None:
        raise bad("arena %s.%s is required" % (where, key))
    if isinstance(v, str):
        try:
            v = int(v, 10)
        except ValueError:
            raise bad("arena %s.%s: %r is not an integer" % (where, key, v))
    elif isinstance(v, float) and v == int(v):
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise bad("arena %s.%s must be an integer" % (where, key))
    if not lo <= v <= hi:
        raise bad("arena %s.%s = %d is outside [%d, %d]" % (where, key, v, lo, hi))
    return v


def _real(sec, key, default, where="model"):
    v = sec.get(key, default)
    if isinstance(v, bool):
        raise bad("arena %s.%s must be a number" % (where, key))
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise bad("arena %s.%s: %r is not a decimal" % (where, key, v))
    if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise bad("arena %s.%s must be a finite non-negative number" % (where, key))
    return float(v)


def _section(arena, key):
    v = arena.get(key, {})
    if not isinstance(v, dict):
        raise bad("arena.%s must be an object" % key)
    return v


class ModelConfig:
    """Model shapes and the weights seed."""

    def __init__(self, arena):
        if not isinstance(arena, dict):
            raise bad("arena must be an object")
        m = _section(arena, "model")
        if not m:  # flat arena: model keys at the top level
            m = arena
        kind = m.get("kind", m.get("architecture", "llama"))
        if not isinstance(kind, str) or kind.lower() not in KINDS:
            raise bad("arena model.kind %r: want llama (dense), mixtral (moe) or msa (block-sparse attention)"
                      % (kind,))
        self.kind = KINDS[kind.lower()]
        name = m.get("name", arena.get("name", self.kind))
        self.name = name if isinstance(name, str) and name else self.kind
        self.vocab_size = _int(m, "vocab_size", lo=2)
        self.hidden_size = _int(m, "hidden_size", lo=1)
        self.num_layers = _int(m, "num_layers", m.get("num_hidden_layers"), lo=1, hi=4096)
        self.num_heads = _int(m, "num_heads", m.get("num_attention_heads"), lo=1)
        self.num_kv_heads = _int(m, "num_kv_heads", m.get("num_key_value_heads", self.num_heads), lo=1)
        if self.num_heads % self.num_kv_heads:
            raise bad("arena model: num_heads %d is not a multiple of num_kv_heads %d"
                      % (self.num_heads, self.num_kv_heads))
        default_hd = self.hidden_size // self.num_heads if self.hidden_size % self.num_heads == 0 else None
        self.head_dim = _int(m, "head_dim", default_hd, lo=2, hi=1024)
        if self.head_dim % 2:
            raise bad("arena model.head_dim must be even (rotary embedding)")
        self.intermediate_size = _int(m, "intermediate_size", lo=1)
        self.rms_norm_eps = _real(m, "rms_norm_eps", 1e-5)
        self.rope_theta = _real(m, "rope_theta", 10000.0)
        self.max_position = _int(m, "max_position", m.get("max_position_embeddings", 4096), lo=1)
        self.weights_seed = _int(m, "weights_seed", arena.get("seed", 0))
        self.tie_word_embeddings = bool(m.get("tie_word_embeddings", False))
        eos = m.get("eos_token_id", -1)
        self.eos_token_id = -1 if eos is None else _int({"e": eos}, "e", lo=-1, where="model.eos_token_id")
        if self.kind == "mixtral":
            self.num_experts = _int(m, "num_experts", m.get("num_local_experts"), lo=1, hi=4096)
            self.top_k = _int(m, "top_k", m.get("num_experts_per_tok", 2), lo=1, hi=self.num_experts)
        else:
            self.num_experts, self.top_k = 0, 0
        # The indexer of an msa model (msa.py); zero for other kinds.
        self.index_heads = self.index_head_dim = self.msa_block_size = self.msa_topk = 0
        if self.kind == "msa":
            self.index_heads = _int(m, "index_heads", lo=1, hi=1024)
            self.index_head_dim = _int(m, "index_head_dim", lo=2, hi=1024)
            self.msa_block_size = _int(m, "msa_block_size", lo=1, hi=4096)
            # at most 8: the width verify grades the block-score sheets'
            # ranking in (Go's arena.MaxMSATopK refuses more before this)
            self.msa_topk = _int(m, "msa_topk", lo=1, hi=MAX_MSA_TOPK)
        self.rope_scaling = self._rope_scaling(m.get("rope_scaling"))

    @staticmethod
    def _rope_scaling(rs):
        """Llama-3 style frequency scaling (None when absent)."""
        if rs in (None, {}, ""):
            return None
        if not isinstance(rs, dict):
            raise bad("arena model.rope_scaling must be an object")
        typ = rs.get("rope_type", rs.get("type", "llama3"))
        if typ != "llama3":
            raise bad("arena model.rope_scaling: only rope_type llama3 is supported, not %r" % (typ,))
        w = "model.rope_scaling"
        return {"factor": _real(rs, "factor", 8.0, w),
                "low_freq_factor": _real(rs, "low_freq_factor", 1.0, w),
                "high_freq_factor": _real(rs, "high_freq_factor", 4.0, w),
                "original_max_position": _int(rs, "original_max_position_embeddings",
                                              rs.get("original_max_position", 8192), lo=1, where=w)}

    @property
    def q_dim(self):
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self):
        return self.num_kv_heads * self.head_dim


class EngineConfig:
    """Serving parameters: dtype, device, pages, batch, graph buckets."""

    def __init__(self, arena, model, cuda_available):
        e = _section(arena, "engine")
        m = _section(arena, "model")

        def pick(key, default):
            for sec in (arena, e, m):
                if key in sec:
                    return sec[key]
            return default

        dt = pick("dtype", "bfloat16" if cuda_available else "float32")
        if not isinstance(dt, str) or dt.lower().replace("torch.", "") not in DTYPES:
            raise bad("arena dtype %r: want bfloat16, float16 or float32" % (dt,))
        self.dtype = DTYPES[dt.lower().replace("torch.", "")]
        dev = pick("device", "cuda" if cuda_available else "cpu")
        if not isinstance(dev, str) or not (dev == "cpu" or dev == "cuda" or dev.startswith("cuda:")):
            raise bad("arena device %r: want cpu or cuda" % (dev,))
        self.device = dev
        self.page_size = _int(e, "page_size", 16, lo=1, hi=4096, where="engine")
        self.max_batch = _int(e, "max_batch", 64, lo=1, hi=4096, where="engine")
        self.kv_pages = _int(e, "kv_pages", 0, where="engine")
        self.max_seq_len = _int(e, "max_seq_len", min(model.max_position, 8192), lo=1, where="engine")
        self.max_seq_len = min(self.max_seq_len, model.max_position)
        self.prefill_chunk = _int(e, "prefill_chunk", 4096 if dev != "cpu" else 512,
                                  lo=1, where="engine")
        # The tensor-parallel MoE path: "fused" (moe.fused_experts_reduce:
        # experts and their sum in one call) or "deep" (validator-owned
        # expert GEMMs writing one row per (token, k) pair, then
        # collective.moe_finalize_ar_rmsnorm: the weighted sum, the sum over
        # ranks, the residual and the next norm in one call).
        self.moe_path = e.get("moe_path", "fused") or "fused"
        if self.moe_path not in ("fused", "deep"):
            raise bad("arena engine.moe_path %r: want fused or deep" % (self.moe_path,))
        b = e.get("graph_buckets")
        if b is None:
            b, x = [], 1
            while x < self.max_batch:
                b.append(x)
                x = x * 2 if x < 16 else x + 16
            b.append(self.max_batch)
        if not isinstance(b, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                                              for x in b):
            raise bad("arena engine.graph_buckets must be a list of positive integers")
        self.graph_buckets = sorted(set(x for x in b if x <= self.max_batch))
        self.max_pages_per_seq = -(-self.max_seq_len // self.page_size)
