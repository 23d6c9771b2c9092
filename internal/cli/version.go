package cli

import (
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
		Long: `version prints the module version, the Go toolchain, the source revision
and the op ABI. The revision comes from the Go build info (vcs.revision), or,
in a binary built with -buildvcs=false, from what run.sh stamps with
-ldflags "-X main.revision=$(git rev-parse HEAD)".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, ok := debug.ReadBuildInfo()
			info := versionInfo(bi, ok, a.build)
			if asJSON {
				return writeJSON(a.stdout, info)
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

// versionInfo reads the version, revision and modified flag from the build
// info, falling back to the revision stamped at link time when the build
// info has none.
func versionInfo(bi *debug.BuildInfo, ok bool, b Build) map[string]string {
	info := map[string]string{
		"version":     "devel",
		"go":          runtime.Version(),
		"abi_version": ABIVersion,
	}
	if ok && bi != nil {
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
	if info["revision"] == "" && b.Revision != "" {
		info["revision"] = b.Revision
		if b.Modified != "" {
			info["modified"] = b.Modified
		}
	}
	return info
}
