package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"cacheon/internal/slot"
	"cacheon/internal/target"
)

// catalogs builds the slot and target catalogs; every command that needs
// them goes through here so they are wired in one place.
func catalogs() (*slot.Catalog, *target.Catalog, error) {
	slots, err := slot.NewCatalog()
	if err != nil {
		return nil, nil, fmt.Errorf("build slot catalog: %w", err)
	}
	targets, err := target.NewCatalog(slots)
	if err != nil {
		return nil, nil, fmt.Errorf("build target catalog: %w", err)
	}
	return slots, targets, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func (a *app) slotsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "slots [NAME]",
		Short: "List the registered slots and their call contracts (or show one)",
		Long: `List the registered slots: kind, entry signature, prepare, outputs,
graph-dynamic inputs, correctness policy, registered shapes and the
capability fields each slot's binding supplies. With NAME, show that slot
only (an unknown name is a usage error that lists the known ones). --json
prints the typed contract projection (the same data that is hashed into
target digests).`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			slots, _, err := catalogs()
			if err != nil || len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, n := range slots.Names() {
				if strings.HasPrefix(n, prefix) {
					names = append(names, n)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			slots, _, err := catalogs()
			if err != nil {
				return withCode(ExitInfra, err)
			}
			specs := slots.Specs()
			if len(args) == 1 {
				s, ok := slots.Lookup(args[0])
				if !ok {
					return fmt.Errorf("slots: unknown slot %q; the registered slots are %s", args[0], strings.Join(slots.Names(), ", "))
				}
				specs = []*slot.Spec{s}
			}
			if asJSON {
				type row struct {
					slot.Contract
					ContractDigest string `json:"contract_digest"`
				}
				rows := []row{}
				for _, s := range specs {
					d, err := s.ContractDigest()
					if err != nil {
						return withCode(ExitInfra, err)
					}
					rows = append(rows, row{Contract: s.Contract(), ContractDigest: d})
				}
				return writeJSON(a.stdout, map[string]any{"slots": rows})
			}
			for i, s := range specs {
				if i > 0 {
					fmt.Fprintln(a.stdout)
				}
				printSlot(a.stdout, s)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the typed catalog as JSON for automation")
	return cmd
}

func argSig(a slot.Arg) string {
	switch a.Kind {
	case slot.ArgInput, slot.ArgOutput:
		dt := a.DType
		if dt == "vdt" {
			dt = "<dtype>"
		}
		s := fmt.Sprintf("%s: %s[%s]", a.Name, dt, strings.Join(a.Shape, ","))
		if a.Kind == slot.ArgOutput {
			s += " (output)"
		}
		return s
	case slot.ArgScalar:
		return fmt.Sprintf("%s: %s=%s", a.Name, a.Scalar, a.Value)
	default:
		return a.Name
	}
}

func printSlot(w io.Writer, s *slot.Spec) {
	fmt.Fprintf(w, "%s  (%s)\n", s.Name, s.Kind)
	fmt.Fprintf(w, "  %s\n", s.Description)
	var args []string
	for _, a := range s.Args {
		args = append(args, argSig(a))
	}
	fmt.Fprintf(w, "  entry:    %s(%s)\n", s.Entry, strings.Join(args, ", "))
	if s.Prepare != "" {
		var p []string
		for _, a := range s.PrepareArgs {
			p = append(p, argSig(a))
		}
		fmt.Fprintf(w, "  prepare:  %s(%s) -> prepared\n", s.Prepare, strings.Join(p, ", "))
	}
	fmt.Fprintf(w, "  graph-dynamic inputs: %s\n", strings.Join(s.GraphDynamic, ", "))
	c := s.Correctness
	pol := c.Metric
	switch c.Metric {
	case "matched_ratio":
		pol += fmt.Sprintf(" >= %s, no element beyond %s x tolerance", c.MinRatio, c.OutlierMult)
	case "topk_overlap":
		pol += fmt.Sprintf(" K=%d >= %s per row", c.K, c.MinOverlap)
	}
	var tols []string
	for _, dt := range []string{"bfloat16", "float16", "float32"} {
		if t, ok := c.Tolerances[dt]; ok {
			tols = append(tols, fmt.Sprintf("%s atol=%s rtol=%s", dt, t.Atol, t.Rtol))
		}
	}
	if c.SensitivityUnits != "" {
		tols = append(tols, fmt.Sprintf("errors up to %s unit roundoffs x rounding sensitivity allowed", c.SensitivityUnits))
	}
	fmt.Fprintf(w, "  correctness: %s; %s\n", pol, strings.Join(tols, "; "))
	fmt.Fprintf(w, "  shapes:   %s\n", shapeList(s.Shapes))
	if s.Count != "" {
		// What verify adds to the registered shapes (docs/verify.md, "What
		// verify generates"); not yet part of the contract projection.
		extra := fmt.Sprintf("%s at 1, %d (the registered maximum) and a draw in between", s.Count, s.MaxCount)
		for _, name := range slices.Sorted(maps.Keys(s.ScalarRanges)) {
			r := s.ScalarRanges[name]
			extra += fmt.Sprintf("; %s over [%s, %s]", name, r.Min, r.Max)
			if len(r.Served) > 0 {
				extra += fmt.Sprintf(" and at %s", strings.Join(r.Served, ", "))
			}
		}
		if len(s.ServedShapes) > 0 {
			extra += "; the shipped arenas' shapes " + shapeList(s.ServedShapes)
		}
		if len(s.ProbeShapes) > 0 {
			extra += "; probe shapes " + shapeList(s.ProbeShapes)
		}
		if drawn := s.DrawnShapes(1); len(drawn) > 0 {
			names := make([]string, len(drawn))
			for i, sh := range drawn {
				names[i] = sh.Name
			}
			extra += "; shapes whose free sizes each row's seed draws (" + strings.Join(names, ", ") + ")"
		}
		if len(s.NormedRows) > 0 {
			extra += "; rows of one RMS in " + strings.Join(s.NormedRows, ", ") + " (an RMS norm's output, as served)"
		}
		if len(s.GatedRows) > 0 {
			extra += "; gate halves of " + strings.Join(s.GatedRows, ", ") + " leaning negative alone in some calls"
		}
		if s.Rotary != nil {
			extra += fmt.Sprintf("; %s and %s turned by a rotary embedding at their positions in some calls", s.Rotary.Query, s.Rotary.Key)
		}
		if s.OutlierMax > 0 {
			extra += fmt.Sprintf("; heavy-tailed outliers up to %g", s.OutlierMax)
			if s.OutlierProduct {
				extra += fmt.Sprintf(" (in float16 each gate·up product at most %d)", slot.ProductCap)
			}
		}
		fmt.Fprintf(w, "  verify also: %s\n", extra)
	}
	fmt.Fprintf(w, "  capability fields: %s\n", strings.Join(s.DescriptorFields, ", "))
}

// shapeList renders shapes as "name{D=1 N=2} jitter N; ...".
func shapeList(list []slot.Shape) string {
	var shapes []string
	for _, sh := range list {
		var dims []string
		for k, v := range sh.Dims {
			dims = append(dims, fmt.Sprintf("%s=%d", k, v))
		}
		sort.Strings(dims)
		j := ""
		if len(sh.Jitter) > 0 {
			j = " jitter " + strings.Join(sh.Jitter, ",")
		}
		shapes = append(shapes, fmt.Sprintf("%s{%s}%s", sh.Name, strings.Join(dims, " "), j))
	}
	return strings.Join(shapes, "; ")
}
