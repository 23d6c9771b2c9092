package verify

import (
	"strings"
	"testing"
	"unicode"

	"cacheon/internal/fault"
	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

func params(spec string) []worker.Param {
	var out []worker.Param
	for _, f := range strings.Fields(spec) {
		p := worker.Param{Name: f, Kind: "positional"}
		switch {
		case strings.HasPrefix(f, "**"):
			p.Name, p.Kind = f[2:], "var_keyword"
		case strings.HasPrefix(f, "*"):
			p.Name, p.Kind = f[1:], "var_positional"
		case strings.HasPrefix(f, "kw:"):
			p.Name, p.Kind = f[3:], "keyword_only"
		}
		if strings.HasSuffix(p.Name, "=") {
			p.Name, p.Default = strings.TrimSuffix(p.Name, "="), true
		}
		out = append(out, p)
	}
	return out
}

// TestEntryABI: the worker calls the entry with the slot's arguments
// positionally; an entry that cannot take them is refused before any call
// with both argument lists named, and the paged decode slot says how it
// differs from the dense ABI.
func TestEntryABI(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	decode, _ := cat.Lookup("attention.decode")
	silu, _ := cat.Lookup("activation.silu_and_mul")
	tests := []struct {
		name   string
		spec   *slot.Spec
		params []worker.Param
		want   string // "" = binds
	}{
		{"unknown", silu, nil, ""},
		{"exact", silu, params("x out"), ""},
		{"other names", silu, params("inp output"), ""},
		{"extra defaults", silu, params("x out eps= kw:flag="), ""},
		{"var positional", silu, params("*args"), ""},
		{"var keyword", silu, params("x out **kw"), ""},
		{"paged decode", decode, params("q k_cache v_cache block_table seq_lens sm_scale out"), ""},
		{"too few", silu, params("x"), "slot activation.silu_and_mul calls silu_and_mul(x, out), but the entry is silu_and_mul(x): it takes 1 positional argument(s), the slot passes 2"},
		{"too many required", silu, params("x out eps"), "it requires 3 positional argument(s), the slot passes 2"},
		{"keyword-only required", silu, params("x out kw:eps"), "it requires keyword-only argument(s) eps"},
		{"dense decode", decode, params("q k v seq_lens sm_scale out"),
			"entry ABI mismatch, nothing was called: slot attention.decode calls silu_and_mul(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out), " +
				"but the entry is silu_and_mul(q, k, v, seq_lens, sm_scale, out): it takes 6 positional argument(s), the slot passes 7; " +
				"attention.decode is the paged decode ABI on purpose"},
		{"rendering", silu, params("x= *a **k"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := entryABI(tt.spec, "silu_and_mul", tt.params)
			if tt.want == "" {
				if got != "" {
					t.Fatalf("refused: %s", got)
				}
				return
			}
			if !strings.Contains(got, tt.want) {
				t.Fatalf("reason %q does not contain %q", got, tt.want)
			}
		})
	}
}

// TestNoneApplicable: a run whose every row is N/A verified nothing and is
// the candidate's failure; one applicable row is enough to decide by rows.
func TestNoneApplicable(t *testing.T) {
	na := Row{Slot: "a.b", Variant: "default", Outcome: NotApplicable, Reason: `dtype: "float32" not in one_of ["bfloat16"]`}
	tests := []struct {
		name string
		rows []Row
		none bool
	}{
		{"no rows", nil, false},
		{"all N/A", []Row{na, na}, true},
		{"one applies", []Row{na, {Outcome: NumericalPass}}, false},
		{"one fails", []Row{na, {Outcome: Fail}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Device: "cpu", DTypes: []string{"float32"}, WorldSizes: []int{2}, Rows: tt.rows}
			if r.NoneApplicable() != tt.none {
				t.Fatalf("NoneApplicable = %v, want %v", !tt.none, tt.none)
			}
			err := r.NoneApplicableErr()
			if (err != nil) != tt.none {
				t.Fatalf("NoneApplicableErr = %v", err)
			}
			if err != nil {
				if fault.Of(err) != fault.Candidate || !strings.Contains(err.Error(), "no variant applicable on device=cpu dtype=float32") ||
					!strings.Contains(err.Error(), "a.b/default: dtype") {
					t.Fatalf("err = %v (fault %v)", err, fault.Of(err))
				}
			}
		})
	}
}

// FuzzEntryABI: whatever parameter list a worker reports, the check never
// panics, and it refuses only lists that cannot take the slot's arguments
// positionally.
func FuzzEntryABI(f *testing.F) {
	f.Add("q k v seq_lens sm_scale out", 3)
	f.Add("x out eps= kw:flag *a **k", 0)
	f.Add("", 9)
	cat, err := slot.NewCatalog()
	if err != nil {
		f.Fatal(err)
	}
	specs := cat.Specs()
	f.Fuzz(func(t *testing.T, list string, which int) {
		spec := specs[uint(which)%uint(len(specs))]
		ps := params(list)
		reason := entryABI(spec, "entry", ps)
		pos, varPos := 0, false
		for _, p := range ps {
			switch p.Kind {
			case "positional":
				pos++
			case "var_positional":
				varPos = true
			}
		}
		for _, r := range reason {
			if !unicode.IsPrint(r) {
				t.Fatalf("unprintable %U in reason %q", r, reason)
			}
		}
		if reason != "" && (pos >= len(spec.Args) || varPos) && !strings.Contains(reason, "requires") {
			t.Fatalf("refused a list that takes %d positional arguments (var: %v): %s", pos, varPos, reason)
		}
	})
}
