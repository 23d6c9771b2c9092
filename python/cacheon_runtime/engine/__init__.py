"""cacheon_runtime.engine: the embedded arena runtime (a compact serving engine).

A Llama-style dense or Mixtral-style MoE model with a paged KV cache,
continuous batching, greedy decoding with per-token logprobs and CUDA graphs
for decode, on one process or tensor parallel over several (one process per
rank, torch.distributed), whose data plane calls every registered slot
through one dispatch layer (``dispatch.py``). Go launches it (``main.py``, protocol in
docs/engine-protocol.md), sends it work and times it on the host; nothing
this process says about speed is believed.

Modules: config (arena parsing), kernels (Triton, CUDA only), stock (stock
slot implementations), capability (the capability domains that decide
eligibility), dispatch (stock/candidate routing, eligibility, revalidation,
counters, audit), collectives (the collective slot calls of a
tensor-parallel engine), weights (seeded-random init, checkpoint loading,
tensor-parallel shards),
model (forward passes), batching (KV page pool, packed prefill forwards,
requests), runner (scheduler, graphs), scoring (teacher-forced score
requests), main (the JSON-lines
server).
"""
