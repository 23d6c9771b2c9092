package cli

import (
	"bytes"
	"cacheon/internal/engine"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
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
	fmt.Fprintf(w, "(host-timed; %d warm-up wave(s) not scored; decode = full wave - prefill-only wave)\n", b.Warmup)
	if unresolved > 0 {
		fmt.Fprintf(w, "(-: %d wave(s) whose prefill-only wave took as long as the whole wave: decode is within timing noise\n"+
			"   and left out of the decode median; give the workload longer outputs to measure it)\n", unresolved)
	}
	fmt.Fprintf(w, "\nslot calls since load (warm-up and prefill-only waves included):\n")
	fmt.Fprintf(w, "\n%-28s %9s %9s %9s %10s %8s %8s\n", "slot", "selected", "completed", "fallback", "ineligible", "audited", "stock")
	for _, name := range sortedKeys(b.Slots) {
		c := b.Slots[name]
		fmt.Fprintf(w, "%-28s %9d %9d %9d %10d %8d %8d\n", name, c.Selected, c.Completed, c.Fallback, c.Ineligible, c.Audited, c.Stock)
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
	if len(r.Audit) > 0 {
		fmt.Fprintln(w)
	}
	pass := 0
	for _, a := range r.Audit {
		if a.Outcome == engine.AuditPass {
			pass++
			continue
		}
		fmt.Fprintf(w, "audit FAIL %s (%s call %d): %s\n", a.File, a.Slot, a.Call, a.Reason)
	}
	if len(r.Audit) > 0 {
		fmt.Fprintf(w, "audit: %d of %d dump(s) PASS\n", pass, len(r.Audit))
	}
	fmt.Fprintf(w, "\ntokens digest %s; %.1fs\n", b.TokensDigest, r.Seconds)
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

// profilePhase is one phase of the runtime's self-reported profile.
type profilePhase struct {
	Count    int                `json:"count"`
	DeviceMS float64            `json:"device_ms"`
	HostMS   float64            `json:"host_ms"`
	SplitMS  map[string]float64 `json:"split_ms"`
	SlotsMS  map[string]float64 `json:"slots_ms"`
}

// printProfile renders the runtime's time split per phase as shares of a
// step, and each slot's share: a slot that is 0.1% of a decode step cannot
// produce a measurable end-to-end win. Unknown shapes print as JSON.
func printProfile(w io.Writer, raw json.RawMessage) {
	var phases map[string]json.RawMessage
	if err := json.Unmarshal(raw, &phases); err != nil {
		fmt.Fprintln(w, indentJSON(raw))
		return
	}
	for _, name := range []string{"prefill", "decode"} {
		var p profilePhase
		if err := json.Unmarshal(phases[name], &p); err != nil || p.Count == 0 || p.DeviceMS <= 0 {
			continue
		}
		fmt.Fprintf(w, "  %s: %d steps, %.3f ms/step\n", name, p.Count, p.DeviceMS/float64(p.Count))
		fmt.Fprintf(w, "    split:")
		for _, k := range byValueDesc(p.SplitMS) {
			fmt.Fprintf(w, " %s %.1f%%", k, 100*p.SplitMS[k]/p.DeviceMS)
		}
		fmt.Fprintf(w, "\n    slot share of a step:")
		for _, k := range byValueDesc(p.SlotsMS) {
			fmt.Fprintf(w, " %s %.1f%%", k, 100*p.SlotsMS[k]/p.DeviceMS)
		}
		fmt.Fprintln(w)
	}
}

// byValueDesc lists m's keys, largest value first.
func byValueDesc(m map[string]float64) []string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	return keys
}
