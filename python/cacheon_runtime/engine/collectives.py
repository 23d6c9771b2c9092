"""collectives: the collective slots a tensor-parallel engine calls, as
methods of dispatch.Dispatch (a mixin, so that they go through the one
``_call``: descriptor, selection, validator-owned outputs, poison, strict
abort, counters, audit). Every cross-rank reduction of the model is one of
them; stock is torch.distributed on the engine's process group (stock.py),
a candidate gets the group as its ``group`` argument."""

from . import stock

ALL_REDUCE = "collective.all_reduce"
AR_RMSNORM = "collective.ar_residual_rmsnorm"
MOE_REDUCE = "moe.fused_experts_reduce"
MOE_FINALIZE = "collective.moe_finalize_ar_rmsnorm"


class CollectiveCalls:
    """Needs the host class's ``_call``, ``_desc``, ``group`` and
    ``world_size`` (dispatch.Dispatch)."""

    def all_reduce(self, x):
        """The sum over ranks of x (M, H), into a validator-owned output."""
        m, h = x.shape
        desc = self._desc(num_tokens=m, hidden_dim=h, last_dim=h, world_size=self.world_size)
        g = self.group
        return self._call(ALL_REDUCE, desc, {"x": x}, {}, {"out": (m, h)},
                          lambda o: stock.all_reduce(x, o["out"], g))

    def ar_residual_rmsnorm(self, x, residual, weight, eps):
        """(out_norm, out_residual): out_residual = the sum over ranks of x
        plus residual, out_norm its RMSNorm."""
        m, h = x.shape
        desc = self._desc(num_tokens=m, hidden_dim=h, world_size=self.world_size)
        g = self.group
        o = self._call(AR_RMSNORM, desc, {"x": x, "residual": residual, "weight": weight}, {"eps": float(eps)},
                       {"out_norm": (m, h), "out_residual": (m, h)},
                       lambda o: stock.ar_residual_rmsnorm(x, residual, weight, eps, o["out_norm"],
                                                           o["out_residual"], g), multi=True)
        return o["out_norm"], o["out_residual"]

    def fused_experts_reduce(self, x, topk_ids, topk_weights, experts):
        """The experts on this rank's weight shards, summed over ranks."""
        m, h = x.shape
        e, n2, _ = experts.w13.shape
        desc = self._desc(num_tokens=m, hidden_dim=h, intermediate_dim=n2 // 2 * self.world_size,
                          num_experts=e, top_k=topk_ids.shape[1], world_size=self.world_size, quant="dense")
        g = self.group
        return self._call(MOE_REDUCE, desc, {"x": x, "topk_ids": topk_ids, "topk_weights": topk_weights}, {},
                          {"out": (m, h)},
                          lambda o: stock.fused_experts_reduce(x, topk_ids, topk_weights, experts.stock, o["out"], g),
                          experts=experts)

    def moe_finalize_ar_rmsnorm(self, gemm_out, row_map, scales, residual, weight, eps):
        """(out_norm, out_residual) of the deep MoE path: the weighted sum
        of each token's expert rows, summed over ranks, plus residual, and
        its RMSNorm (with the next layer's input norm)."""
        t, h = residual.shape
        desc = self._desc(num_tokens=t, hidden_dim=h, top_k=scales.shape[1], world_size=self.world_size)
        g = self.group
        o = self._call(MOE_FINALIZE, desc, {"gemm_out": gemm_out, "row_map": row_map, "scales": scales,
                                             "residual": residual, "weight": weight}, {"eps": float(eps)},
                       {"out_norm": (t, h), "out_residual": (t, h)},
                       lambda o: stock.moe_finalize_ar_rmsnorm(gemm_out, row_map, scales, residual, weight, eps,
                                                               o["out_norm"], o["out_residual"], g), multi=True)
        return o["out_norm"], o["out_residual"]
