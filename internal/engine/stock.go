package engine

import (
	"context"
	"fmt"
)

// StockComparison compares a candidate stack's read with a read of the
// stock stack on the same arena, workload and seed. Greedy tokens that
// differ mean the candidates change what the model generates; bf16 kernels
// may legitimately flip a near-tie, so it is a loud warning, not a verdict.
type StockComparison struct {
	// TokensDigest is the stock read's (BenchResult.TokensDigest).
	TokensDigest string `json:"tokens_digest"`
	// Match is whether every timed wave generated the same tokens.
	Match bool `json:"match"`
	// DifferingWaves are the 1-based timed waves whose tokens differ.
	DifferingWaves []int `json:"differing_waves,omitempty"`
	// Median is the stock read's median rates (host-timed like any read;
	// one read each, so not a scored speedup).
	Median Summary `json:"median"`
}

// CompareWithStock reads the stock stack with the bench options o on a
// fresh session configured as c (the configuration s was opened with) less
// its stack, audit and profile, in s's graph mode, and compares its tokens
// with res, s's read. s may be closed already (only how it was opened is
// used); closing it first keeps one model in memory at a time. A stock
// read that fails is the infrastructure's (Session.Attribute).
func (s *Session) CompareWithStock(ctx context.Context, c Config, o BenchOptions, res *BenchResult) (*StockComparison, error) {
	c.Stack, c.Audit, c.Profile = nil, nil, false
	c.Graphs = GraphsOff
	if s.Graphs {
		c.Graphs = GraphsOn
	}
	c.Progress = prefixed(c.Progress, "stock stack: ")
	o.Progress = prefixed(o.Progress, "stock stack: ")
	stock, err := Open(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("stock stack: %w", err)
	}
	defer stock.Close()
	sr, err := stock.Bench(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("stock stack: %w", err)
	}
	return CompareTokens(res, sr), nil
}

// CompareTokens compares a candidate read's tokens with a stock read's,
// wave by wave.
func CompareTokens(cand, stock *BenchResult) *StockComparison {
	cmp := &StockComparison{TokensDigest: stock.TokensDigest, Median: stock.Median,
		Match: cand.TokensDigest == stock.TokensDigest}
	for i := range max(len(cand.Waves), len(stock.Waves)) {
		if i >= len(cand.Waves) || i >= len(stock.Waves) || cand.Waves[i].TokensDigest != stock.Waves[i].TokensDigest {
			cmp.DifferingWaves = append(cmp.DifferingWaves, i+1)
		}
	}
	if len(cmp.DifferingWaves) > 0 {
		cmp.Match = false
	}
	return cmp
}

func prefixed(f func(string), prefix string) func(string) {
	if f == nil {
		return nil
	}
	return func(line string) { f(prefix + line) }
}
