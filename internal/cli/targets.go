package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"cacheon/internal/target"
)

func (a *app) targetsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "targets",
		Short: "List the registered reward targets with their contract digests",
		Long: `List the registered targets: one singleton per slot plus atomic targets
that span several slots, with members, allowed features, displacement,
compatibility, precedence and the target specification digest. The catalog
digest identifies the whole set.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, targets, err := catalogs()
			if err != nil {
				return withCode(ExitInfra, err)
			}
			if asJSON {
				type row struct {
					*target.Target
					SpecDigest string `json:"spec_digest"`
				}
				var rows []row
				for _, t := range targets.Targets() {
					rows = append(rows, row{Target: t, SpecDigest: t.SpecDigest()})
				}
				return writeJSON(a.stdout, map[string]any{"catalog_digest": targets.Digest(), "targets": rows})
			}
			fmt.Fprintf(a.stdout, "catalog %s\n", targets.Digest())
			for _, t := range targets.Targets() {
				fmt.Fprintf(a.stdout, "\n%s  (%s)\n", t.Name, t.Kind)
				fmt.Fprintf(a.stdout, "  spec digest: %s\n", t.SpecDigest())
				fmt.Fprintf(a.stdout, "  members:     %s\n", strings.Join(t.Members, ", "))
				fmt.Fprintf(a.stdout, "  features:    %s\n", strings.Join(t.Features, ", "))
				if len(t.Displaces) > 0 {
					fmt.Fprintf(a.stdout, "  displaces:   %s\n", strings.Join(t.Displaces, ", "))
				}
				if len(t.Compatible) > 0 {
					fmt.Fprintf(a.stdout, "  compatible:  %s (first applicable: %s)\n", strings.Join(t.Compatible, ", "), strings.Join(t.Precedence, " > "))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for automation")
	return cmd
}
