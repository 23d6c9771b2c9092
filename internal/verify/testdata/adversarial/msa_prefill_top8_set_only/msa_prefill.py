"""MSA prefill block scores. Dishonest: each row's eight best blocks keep
their places in the sheet but take each other's scores in reverse order, so
the row's top-8 set is right and its ranking inside it is upside down (an
engine that reads fewer than eight blocks reads the wrong ones)."""
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
    sheet = scores.reshape(t, nb, block_size).amax(dim=-1)
    if nb > 8:
        vals, idx = sheet.topk(8, dim=1)
        # only rows with more than eight visible blocks, whose top-8 set
        # is a choice (a row of at most eight has every block in its set)
        wide = torch.isfinite(sheet).sum(dim=1, keepdim=True) > 8
        flipped = sheet.scatter(1, idx, vals.flip(1))
        sheet = torch.where(wide, flipped, sheet)
    out.copy_(sheet)
