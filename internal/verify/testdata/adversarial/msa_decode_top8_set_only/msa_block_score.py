"""MSA decode block scores. Dishonest: on a row with more than eight
visible blocks, the eight best blocks keep their places but take each
other's scores in reverse order: the top-8 set is right, the ranking inside
it upside down."""
import torch


def msa_block_score(q, index_k, seq_lens, block_size, out):
    b, s = index_k.shape[0], index_k.shape[1]
    nb = out.shape[1]
    qs = q.float().sum(dim=1)
    scores = torch.einsum("bd,bsd->bs", qs, index_k[:, :, 0, :].float())
    pos = torch.arange(s, device=q.device).unsqueeze(0)
    scores = scores.masked_fill(pos >= seq_lens.long().unsqueeze(1), float("-inf"))
    pad = nb * block_size - s
    if pad > 0:
        scores = torch.cat([scores, scores.new_full((b, pad), float("-inf"))], dim=1)
    sheet = scores.reshape(b, nb, block_size).amax(dim=-1)
    if nb > 8:
        vals, idx = sheet.topk(8, dim=1)
        wide = torch.isfinite(sheet).sum(dim=1, keepdim=True) > 8
        sheet = torch.where(wide, sheet.scatter(1, idx, vals.flip(1)), sheet)
    out.copy_(sheet)
