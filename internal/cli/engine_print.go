package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"cacheon/internal/engine"
)

func printEngineBench(w io.Writer, r *engineBenchReport) {
	b := r.Bench
	mode := "strict"
	if !r.Strict {
		mode = "non-strict"
	}
	fmt.Fprintf(w, "engine bench %s (workload %s)  arena %s\n", r.Arena, r.Workload, r.ArenaDigest)
	fmt.Fprintf(w, "device=%s (%s) dtype=%s graphs=%s %s; python %s, torch %s\n", r.Device, r.DeviceName, r.DType, onOff(r.Graphs), mode, r.Python, r.Torch)
	fmt.Fprintln(w, "sandbox:")
	for _, l := range r.Sandbox {
		fmt.Fprintf(w, "  %s\n", l)
	}
	if l := r.Loaded; l != nil {
		fmt.Fprintf(w, "model: %d layers, %s params on %s, %d KV pages, graph buckets %v\n", l.Layers, humanCount(l.Params), l.Device, l.KVPages, l.GraphBuckets)
		if len(l.PrefillGraphTokens) > 0 {
			fmt.Fprintf(w, "prefill graphs: a single prompt padded to %v tokens\n", l.PrefillGraphTokens)
		}
	}
	if len(r.Stack) == 0 {
		fmt.Fprintln(w, "stack: all stock")
	}
	for _, s := range r.Stack {
		fmt.Fprintf(w, "stack: %-26s %s/%s:%s  (%s, %.12s)\n", s.Slot, s.Bundle, s.Source, s.Entry, s.Variant, s.ContentHash)
	}
	fmt.Fprintf(w, "\n%-7s %8s %7s %7s %9s %10s %10s %14s %9s %13s\n", "wave", "requests", "prompt", "tokens", "seconds", "tok/s", "prefill s", "prefill tok/s", "decode s", "decode tok/s")
	unresolved := 0
	for _, x := range b.Waves {
		ds, dr := fmt.Sprintf("%.4f", x.DecodeSeconds), fmt.Sprintf("%.1f", x.DecodeTokensPerSec)
		if x.DecodeWithinNoise {
			ds, dr = "-", "-"
			unresolved++
		}
		fmt.Fprintf(w, "%-7d %8d %7d %7d %9.4f %10.1f %10.4f %14.1f %9s %13s\n", x.Index+1, x.Requests, x.PromptTokens, x.Generated,
			x.Seconds, x.TokensPerSec, x.PrefillSeconds, x.PrefillTokensPerSec, ds, dr)
	}
	m := b.Median
	fmt.Fprintf(w, "%-7s %8s %7s %7s %9.4f %10.1f %10s %14.1f %9s %13.1f\n", "median", "", "", "", m.Seconds, m.TokensPerSec, "", m.PrefillTokensPerSec, "", m.DecodeTokensPerSec)
	fmt.Fprintf(w, "%-7s %s\n", "spread", spreadLine(b))
	fmt.Fprintf(w, "(host-timed; %d warm-up wave(s) not scored; decode = full wave - prefill-only wave)\n", b.Warmup)
	if unresolved > 0 {
		fmt.Fprintf(w, "(-: %d wave(s) whose prefill-only wave took as long as the whole wave: decode is within timing noise\n"+
			"   and left out of the decode median; give the workload longer outputs to measure it)\n", unresolved)
	}
	fmt.Fprintf(w, "\nslot calls since load (warm-up and prefill-only waves included):\n")
	width := 28
	for name := range b.Slots {
		width = max(width, len(name))
	}
	fmt.Fprintf(w, "\n%-*s %9s %9s %9s %10s %8s %8s\n", width, "slot", "selected", "completed", "fallback", "ineligible", "audited", "stock")
	for _, name := range sortedKeys(b.Slots) {
		c := b.Slots[name]
		fmt.Fprintf(w, "%-*s %9d %9d %9d %10d %8d %8d\n", width, name, c.Selected, c.Completed, c.Fallback, c.Ineligible, c.Audited, c.Stock)
	}
	for _, rc := range b.Receipts {
		fmt.Fprintf(w, "fallback receipt: %s ×%d: %s\n", rc.Slot, rc.Count, rc.Reason)
	}
	for _, s := range r.NeverFired {
		fmt.Fprintf(w, "warning: stack slot %s never fired (no call was selected or found ineligible)\n", s)
	}
	if len(b.RuntimeProfile) > 0 {
		fmt.Fprintf(w, "\nruntime self-reported profile (untrusted, diagnostic only; graphs off while profiling):\n")
		printProfile(w, b.RuntimeProfile)
		if r.Device == "cuda" {
			fmt.Fprintf(w, "  (on CUDA an eager step is bound by kernel launches, so this split mostly times the host;\n"+
				"   python/bench/profile_kernels.py --split gives the kernel time of a decode step by region and slot)\n")
		}
	}
	printAudit(w, r)
	fmt.Fprintf(w, "\ntokens digest %s; %.1fs\n", b.TokensDigest, r.Seconds)
	switch c := r.StockTokens; {
	case c == nil:
	case c.Match:
		fmt.Fprintf(w, "tokens: the same as the stock stack's (same arena, workload and seed; stock median %.1f tok/s)\n", c.Median.TokensPerSec)
	default:
		fmt.Fprintf(w, "WARNING: %s\n", stockDiffers(c))
	}
}

// spreadLine words the spread of a read's timed waves beside its median.
func spreadLine(b *engine.BenchResult) string {
	sp, m := b.Spread, b.Median.TokensPerSec
	line := fmt.Sprintf("tok/s %.1f-%.1f over %d timed wave(s)", sp.MinTokensPerSec, sp.MaxTokensPerSec, len(b.Waves))
	if m > 0 {
		line += fmt.Sprintf(" (%+.1f%% / %+.1f%% of the median)", 100*(sp.MinTokensPerSec/m-1), 100*(sp.MaxTokensPerSec/m-1))
	}
	return line
}

// stockDiffers says that a candidate stack's tokens differ from stock's.
func stockDiffers(c *engine.StockComparison) string {
	waves := make([]string, len(c.DifferingWaves))
	for i, n := range c.DifferingWaves {
		waves[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("the stack's tokens DIFFER from the stock stack's on the same arena, workload and seed (timed wave(s) %s; stock tokens digest %s): the candidates change what the model generates",
		strings.Join(waves, ", "), c.TokensDigest)
}

// printAudit prints the audit per slot: dumps, failures and the worst.
func printAudit(w io.Writer, r *engineBenchReport) {
	if len(r.Audit) == 0 {
		return
	}
	fmt.Fprintln(w)
	pass := 0
	for _, s := range r.AuditSlots {
		pass += s.Dumps - s.Failed
		if s.Worst == nil {
			fmt.Fprintf(w, "audit PASS %s: %d dump(s)\n", s.Slot, s.Dumps)
			continue
		}
		x := s.Worst
		worst := x.Reason
		if x.Metric != "" {
			worst += fmt.Sprintf(" (score %.6g)", x.Score)
		}
		fmt.Fprintf(w, "audit FAIL %s: %d of %d dump(s) failed; worst %s (call %d): %s\n", s.Slot, s.Failed, s.Dumps, x.File, x.Call, worst)
	}
	fmt.Fprintf(w, "audit: %d of %d dump(s) PASS\n", pass, len(r.Audit))
}

func indentJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "  ", "  "); err != nil {
		return string(raw)
	}
	return "  " + buf.String()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
