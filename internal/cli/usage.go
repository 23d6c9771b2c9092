package cli

// Usage errors and the --json error object: both decided once, here, for
// every command.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"cacheon/internal/bundle"
	"cacheon/internal/fault"
	"cacheon/internal/scan"
)

// usageError is a wrong command line: what is wrong, then the usage line.
type usageError struct {
	msg   string
	usage string
}

func (e *usageError) Error() string { return e.msg + "\nusage: " + e.usage }

func newUsageError(c *cobra.Command, msg string) error {
	if c.HasParent() {
		msg = strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ") + ": " + msg
	}
	return withCode(ExitUsage, &usageError{msg: msg, usage: c.UseLine()})
}

// usageOnArgs makes every command's argument check answer with its usage
// line ("usage: cacheon scan BUNDLE [flags]") instead of cobra's count.
func usageOnArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			switch {
			case err == nil:
				return nil
			case len(args) == 0:
				return newUsageError(cmd, "missing argument")
			case strings.HasPrefix(err.Error(), "unknown command"):
				return withCode(ExitUsage, &usageError{msg: err.Error(), usage: cmd.UseLine()})
			}
			return newUsageError(cmd, fmt.Sprintf("wrong number of arguments (got %d: %s)", len(args), strings.Join(args, " ")))
		}
	}
	for _, sub := range c.Commands() {
		usageOnArgs(sub)
	}
}

// wantsJSON reports whether the command line asked for --json: the parsed
// flag of the executed command, else (when parsing failed before it) the
// raw arguments up to "--".
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("json"); f != nil && f.Changed {
			return f.Value.String() == "true"
		}
	}
	for _, arg := range args {
		if arg == "--" {
			break
		}
		if arg == "--json" {
			return true
		}
		if v, ok := strings.CutPrefix(arg, "--json="); ok {
			b, err := strconv.ParseBool(v)
			return err == nil && b
		}
	}
	return false
}

// errorJSON is the shape of an error under --json.
type errorJSON struct {
	Error    string        `json:"error"`
	ExitCode int           `json:"exit_code"`
	Kind     string        `json:"kind"`
	Usage    string        `json:"usage,omitempty"`
	Findings []findingJSON `json:"findings,omitempty"`
}

// errorObject is err as the JSON object a script reads instead of stderr.
func errorObject(err error, code int) errorJSON {
	o := errorJSON{Error: err.Error(), ExitCode: code, Kind: "usage"}
	switch code {
	case ExitFindings:
		o.Kind = "candidate"
	case ExitInfra:
		o.Kind = "infrastructure"
	}
	var ue *usageError
	if errors.As(err, &ue) {
		o.Error, o.Usage = ue.msg, ue.usage
	}
	var fe *scan.FindingsError
	if errors.As(err, &fe) {
		o.Findings = findingsJSON(fe.Findings)
	}
	return o
}

// bundleOpenErr makes a bundle that cannot be opened (missing, neither a
// directory nor a .tar.gz) the input's fault, as every input is.
func bundleOpenErr(err error) error {
	var se *bundle.StageError
	if errors.As(err, &se) && se.Step == "open" && fault.Of(err) == fault.Usage {
		return inputErr(err)
	}
	return err
}

// findingsJSON is the JSON shape of scan findings.
func findingsJSON(fs []scan.Finding) []findingJSON {
	out := []findingJSON{}
	for _, f := range fs {
		out = append(out, findingJSON{f.Path, f.Line, f.Col, f.Rule, f.Message})
	}
	return out
}
