package intake

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"cacheon/internal/market/chain"
	"cacheon/internal/store"
)

// benchChain returns n valid reveals, 10 per block, from 2,500 hotkeys.
func benchChain(n int) *fakeChain {
	c := &fakeChain{}
	for i := 0; i < n; i++ {
		content := fmt.Sprintf("bundle-%06d", i)
		c.reveals = append(c.reveals, chain.Reveal{
			Pos: chain.Position{Block: uint64(1 + i/10), Index: uint32(i % 10)}, Hotkey: fmt.Sprintf("hk%04d", i%2500),
			ContentHash: hashOf(content), URL: "https://bundles.example/" + content, CommitBlock: uint64(i / 10), Extrinsic: fmt.Sprintf("x%d", i),
		})
	}
	c.head = uint64(1 + n/10)
	return c
}

func benchIntake(b *testing.B, c *fakeChain, batch int) *Intake {
	b.Helper()
	dir := b.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	in, err := New(Config{Arena: "a", WorkDir: filepath.Join(dir, "work"), HotkeyCap: 8, EpochBlocks: 360, PendingCap: 64, Batch: batch},
		st, c, &fakeFetcher{}, fakeScanner{}, fakeFP{}, fakeScreener{})
	if err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkIntake10k: Poll 10,000 finalized reveals into reservations
// (64 reserved, the rest deferred) on a fresh SQLite store; s/10k is the
// wall time of one Poll over all of them.
func BenchmarkIntake10k(b *testing.B) {
	for _, batch := range []int{256, 64, 16, 1} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c := benchChain(10_000)
			var total time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				in := benchIntake(b, c, batch)
				b.StartTimer()
				start := time.Now()
				n, err := in.Poll(context.Background())
				total += time.Since(start)
				if err != nil || n != 10_000 {
					b.Fatalf("Poll = %d, %v", n, err)
				}
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/10k")
		})
	}
}

// BenchmarkAdmitTx: the latency of one admission transaction (one arrival
// per transaction, or batches of 256) while b.N arrivals fill a fresh
// store; p50 and p99 in ms. Run it with -benchtime 10000x for the 10,000
// arrivals of the target.
func BenchmarkAdmitTx(b *testing.B) {
	for _, batch := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			n := b.N
			c := benchChain(n)
			in := benchIntake(b, c, batch)
			ctx := context.Background()
			lat := make([]time.Duration, 0, n/batch+1)
			b.ResetTimer()
			for i := 0; i < n; i += batch {
				start := time.Now()
				if _, err := in.admit(ctx, c.reveals[i:min(i+batch, n)], c.head); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
		})
	}
}

// BenchmarkCommitFloor: the latency of the smallest write transaction (the
// cursor moved by one) on the same store settings: what the disk's fsync
// costs every admission transaction, whatever it holds.
func BenchmarkCommitFloor(b *testing.B) {
	in := benchIntake(b, &fakeChain{}, 1)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		err := in.st.Update(ctx, func(tx store.Tx) error { return tx.SetCursor(ctx, store.Position{Block: uint64(i + 1)}) })
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[int(0.99*float64(len(lat)-1))].Microseconds())/1000, "p99-ms")
}
