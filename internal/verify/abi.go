package verify

import (
	"fmt"
	"strings"
	"unicode"

	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

// abiNotes explain, per slot, how this validator's entry ABI differs from
// the one a bundle written for the established tool may expect. They are
// appended to an ABI mismatch so the miner learns what to port.
var abiNotes = map[string]string{
	"attention.decode": "attention.decode is the paged decode ABI on purpose: k_cache and v_cache are " +
		"(pages, page_size, Hkv, D), read through block_table (B, max_pages) int32 up to seq_lens; " +
		"an entry written for the dense decode ABI (k, v padded to (B, S, Hkv, D), six arguments) must be ported to it",
}

// entryABI checks, before any call, that an entry whose parameters the
// worker reported can take the slot's arguments: the worker calls it with
// every argument of spec.Args positionally, in order. It returns "" when
// the call binds (or the parameters are unknown) and otherwise the reason,
// naming the argument list expected and the one found. Parameter names are
// not compared: the ABI is positional.
func entryABI(spec *slot.Spec, entry string, params []worker.Param) string {
	if params == nil {
		return ""
	}
	n := len(spec.Args)
	var positional, required int
	var varPos bool
	var kwOnly []string
	for _, p := range params {
		switch p.Kind {
		case "positional":
			positional++
			if !p.Default && positional > n {
				required = positional
			}
		case "var_positional":
			varPos = true
		case "keyword_only":
			if !p.Default {
				kwOnly = append(kwOnly, p.Name)
			}
		}
	}
	var why string
	switch {
	case positional < n && !varPos:
		why = fmt.Sprintf("it takes %d positional argument(s), the slot passes %d", positional, n)
	case required > n:
		why = fmt.Sprintf("it requires %d positional argument(s), the slot passes %d", required, n)
	case len(kwOnly) > 0:
		for i := range kwOnly {
			kwOnly[i] = paramName(kwOnly[i])
		}
		why = fmt.Sprintf("it requires keyword-only argument(s) %s, the slot passes arguments positionally", strings.Join(kwOnly, ", "))
	default:
		return ""
	}
	want := make([]string, n)
	for i, a := range spec.Args {
		want[i] = a.Name
	}
	got := make([]string, len(params))
	for i, p := range params {
		got[i] = paramName(p.Name)
		switch {
		case p.Kind == "var_positional":
			got[i] = "*" + got[i]
		case p.Kind == "var_keyword":
			got[i] = "**" + got[i]
		case p.Default:
			got[i] += "=…"
		}
	}
	reason := fmt.Sprintf("entry ABI mismatch, nothing was called: slot %s calls %s(%s), but the entry is %s(%s): %s",
		spec.Name, entry, strings.Join(want, ", "), entry, strings.Join(got, ", "), why)
	if note := abiNotes[spec.Name]; note != "" {
		reason += "; " + note
	}
	return reason
}

// paramName renders a parameter name the worker reported (candidate
// controlled) for a report line: printable, at most 64 bytes.
func paramName(s string) string {
	s = strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if len(s) > 64 {
		s = strings.ToValidUTF8(s[:61], "") + "..."
	}
	return s
}
