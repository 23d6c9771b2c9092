package slot

import (
	"testing"

	"cacheon/internal/reference"
	"cacheon/internal/tensor"
)

// caseFlops is the floating-point work of one reference call, using the
// reference package's FLOP conventions.
func caseFlops(c *Case) float64 {
	d := c.Dims
	i32 := func(name string) []int32 {
		v, _ := c.i32(0, name)
		return v
	}
	switch c.Spec.Name {
	case "activation.silu_and_mul":
		return reference.SiluAndMulFlops(d["N"], d["D"])
	case "norm.rmsnorm":
		return reference.RMSNormFlops(d["N"], d["H"])
	case "attention.sdpa":
		return reference.SDPAFlops(reference.AttnDims{T: d["T"], S: d["T"] + d["P"], Hq: d["HQ"], Hkv: d["HKV"], D: d["D"]}, d["CAUSAL"] != 0)
	case "attention.decode":
		return reference.PagedDecodeFlops(i32("seq_lens"), reference.DecodeDims{B: d["B"], Hq: d["HQ"], Hkv: d["HKV"], D: d["D"], Pages: d["PAGES"], PageSize: d["PS"], MaxPages: d["MAXP"]})
	case "attention.msa_block_score":
		return reference.MSABlockScoreFlops(i32("seq_lens"), reference.MSADims{B: d["B"], Hq: d["HQ"], S: d["S"], D: d["D"], BlockSize: d["BS"]})
	case "attention.msa_prefill_block_score":
		return reference.MSAPrefillBlockScoreFlops(reference.MSAPrefillDims{T: d["T"], PrefixLen: d["PREFIX"], D: d["D"], BlockSize: d["BS"]})
	case "moe.fused_experts", "moe.fused_experts_reduce":
		return reference.FusedExpertsFlops(moeDims(d))
	case "collective.all_reduce":
		return reference.SumRanksFlops(c.WorldSize, d["M"]*d["H"])
	case "collective.ar_residual_rmsnorm":
		return reference.ARResidualRMSNormFlops(c.WorldSize, d["M"], d["H"])
	case "collective.moe_finalize_ar_rmsnorm":
		return reference.MoEFinalizeARRMSNormFlops(c.WorldSize, reference.FinalizeDims{T: d["T"], TExp: d["T"] + d["PAD"], K: d["K"], H: d["H"]})
	}
	return 0
}

// BenchmarkRegisteredShapes times every slot's trusted reference at every
// registered verification shape, with jittered count dimensions at their
// largest (+25%), as verify runs them. Run with -cpu 1 for the per-core
// figures in docs/performance.md.
func BenchmarkRegisteredShapes(b *testing.B) {
	cat, err := NewCatalog()
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range cat.Specs() {
		for _, sh := range s.Shapes {
			big := Shape{Name: sh.Name, Dims: Dims{}}
			for k, v := range sh.Dims {
				big.Dims[k] = v
			}
			for _, j := range sh.Jitter {
				big.Dims[j] += max(1, sh.Dims[j]/4)
			}
			c, err := s.NewCase(CaseParams{Seed: 1, Shape: big, DType: tensor.BF16, Dist: Normal, WorldSize: 2})
			if err != nil {
				b.Fatal(err)
			}
			flops := caseFlops(c)
			b.Run(s.Name+"/"+sh.Name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if _, err := c.Reference(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
