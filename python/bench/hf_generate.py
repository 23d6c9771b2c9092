"""Baseline for `cacheon engine bench`: HF transformers' generate on the
same Llama shapes (random bf16 weights, static KV cache, greedy, fixed
output length). Not part of the runtime; run on the GPU machine:

    python3 python/bench/hf_generate.py --batch 1 --prompt 128 --new 256

Prints one JSON line with host-timed tokens/s (median of --runs runs).
"""
import argparse
import json
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--runs", type=int, default=5, help="timed runs after one warm-up; the median is reported")
    a = ap.parse_args()
    cfg = LlamaConfig(vocab_size=128256, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=64, intermediate_size=8192, rms_norm_eps=1e-5,
                      rope_theta=500000.0, max_position_embeddings=8192, tie_word_embeddings=True)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device="cuda")
    mask = torch.ones_like(ids)
    kw = dict(max_new_tokens=a.new, min_new_tokens=a.new, do_sample=False,
              cache_implementation="static", pad_token_id=0, attention_mask=mask)
    with torch.no_grad():
        model.generate(ids, **kw)  # warm-up
        times = []
        for _ in range(a.runs):
            torch.cuda.synchronize()
            t = time.perf_counter()
            out = model.generate(ids, **kw)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
    new = out.shape[1] - a.prompt
    med = statistics.median(times)
    print(json.dumps({"batch": a.batch, "prompt": a.prompt, "new_tokens": new, "seconds": med,
                      "tokens_per_s": a.batch * new / med, "transformers": __import__("transformers").__version__,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
