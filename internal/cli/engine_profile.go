package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

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
