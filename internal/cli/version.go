package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// ABIVersion is the op ABI this binary speaks with bundles.
const ABIVersion = "cacheon-op-abi-v0"

func (a *app) versionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the cacheon version, its build and the ABI it speaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := map[string]string{
				"version":     "devel",
				"go":          runtime.Version(),
				"abi_version": ABIVersion,
			}
			if bi, ok := debug.ReadBuildInfo(); ok {
				if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
					info["version"] = bi.Main.Version
				}
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						info["revision"] = s.Value
					case "vcs.modified":
						info["modified"] = s.Value
					}
				}
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			fmt.Fprintf(a.stdout, "cacheon %s (%s", info["version"], info["go"])
			if r := info["revision"]; r != "" {
				fmt.Fprintf(a.stdout, ", revision %.12s", r)
				if info["modified"] == "true" {
					fmt.Fprint(a.stdout, "+dirty")
				}
			}
			fmt.Fprintf(a.stdout, ")\nabi %s\n", info["abi_version"])
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for automation")
	return cmd
}
