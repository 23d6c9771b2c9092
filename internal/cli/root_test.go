package cli

import (
	"errors"
	"fmt"
	"runtime/debug"
	"testing"

	"cacheon/internal/fault"
)

// TestExitCode: the one mapping from an error to the exit status.
func TestExitCode(t *testing.T) {
	base := errors.New("boom")
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"unattributed is usage", base, ExitUsage},
		{"candidate", fault.CandidateErr(base), ExitFindings},
		{"infrastructure", fmt.Errorf("step: %w", fault.InfraErr(base)), ExitInfra},
		{"a command's own code wins", withCode(ExitInfra, fault.CandidateErr(base)), ExitInfra},
	} {
		if got := exitCode(tc.err); got != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.code)
		}
	}
}

// TestVersionInfo: the revision comes from the build info, else from what
// the build stamped with -ldflags -X (a -buildvcs=false build).
func TestVersionInfo(t *testing.T) {
	stamped := Build{Revision: "0123456789abcdef", Modified: "true"}
	vcs := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "feedface"}, {Key: "vcs.modified", Value: "false"}}}
	for _, tc := range []struct {
		name               string
		bi                 *debug.BuildInfo
		b                  Build
		revision, modified string
	}{
		{"build info wins", vcs, stamped, "feedface", "false"},
		{"-buildvcs=false falls back to the stamp", &debug.BuildInfo{}, stamped, "0123456789abcdef", "true"},
		{"neither", &debug.BuildInfo{}, Build{}, "", ""},
	} {
		info := versionInfo(tc.bi, true, tc.b)
		if info["revision"] != tc.revision || info["modified"] != tc.modified || info["abi_version"] != ABIVersion {
			t.Errorf("%s: %v", tc.name, info)
		}
	}
}
