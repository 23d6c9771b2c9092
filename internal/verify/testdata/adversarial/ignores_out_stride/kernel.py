import torch


def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
    t = q.shape[0]
    s = index_k.shape[0]
    nb = out.shape[1]
    scores = (q.float() @ index_k.float().t()) * scale
    rows = torch.arange(t, device=q.device).unsqueeze(1)
    cols = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(cols > rows + prefix_len, float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((t, pad), float("-inf"))], dim=1)
    res = scores.reshape(t, nb, block_size).amax(dim=-1)
    torch.as_strided(out, (t, nb), (nb, 1)).copy_(res)
