package cli

import (
	"cacheon/internal/engine"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) engineGenerateCommand() *cobra.Command {
	var (
		fl      engineFlags
		prompts []string
		maxNew  int
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "generate --arena ARENA [--prompt 1,2,3]...",
		Short: "Run a few prompts through the arena runtime and print tokens and logprobs",
		Long: `generate sends the prompts (comma-separated token ids; default: the first two
requests of the arena's workload) as one batch and prints the greedy tokens
with the logprob of each, and the host-measured wall time.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runEngineGenerate(fl, prompts, maxNew, asJSON)
		},
	}
	fl.register(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&prompts, "prompt", nil, "prompt token ids, comma-separated (repeatable)")
	f.IntVar(&maxNew, "max-new", 8, "tokens to generate per prompt")
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

// engineGenerateReport is the JSON shape of engine generate.
type engineGenerateReport struct {
	Arena   string            `json:"arena"`
	Prompts [][]int           `json:"prompts"`
	Results []engine.Result   `json:"results"`
	Steps   engine.Steps      `json:"runtime_steps"`
	Seconds float64           `json:"seconds"`
	Stack   []engine.StackRow `json:"stack"`
	Loaded  *engine.Loaded    `json:"loaded"`
}

func (a *app) runEngineGenerate(fl engineFlags, prompts []string, maxNew int, asJSON bool) error {
	ctx := a.ctx
	if maxNew < 1 || maxNew > 1<<16 {
		return fmt.Errorf("--max-new %d: want 1..65536", maxNew)
	}
	var parsed [][]int
	for i, p := range prompts {
		var ids []int
		for _, f := range strings.Split(p, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("--prompt %d %q: want comma-separated token ids", i+1, p)
			}
			ids = append(ids, v)
		}
		parsed = append(parsed, ids)
	}
	prog := newProgress(a.stderr)
	defer prog.done()
	cfg, err := a.sessionConfig(fl, nil, prog)
	if err != nil {
		return err
	}
	s, err := a.openSession(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	reqs, parsed, err := s.PromptRequests(parsed, maxNew)
	if err != nil {
		return err
	}
	prog.line(fmt.Sprintf("generating %d prompt(s)", len(reqs)))
	g, err := s.Generate(ctx, reqs, fl.timeout)
	if err != nil {
		return err
	}
	prog.done()
	rep := engineGenerateReport{Arena: s.Arena.Name, Prompts: parsed, Results: g.Results, Steps: g.Steps,
		Seconds: g.Wall.Seconds(), Stack: s.Stack, Loaded: s.Loaded}
	if asJSON {
		return writeJSON(a.stdout, rep)
	}
	fmt.Fprintf(a.stdout, "engine generate %s  (%d prompt(s), %.3fs host time)\n", rep.Arena, len(reqs), rep.Seconds)
	for i, r := range g.Results {
		fmt.Fprintf(a.stdout, "\nprompt %d: %v\n  tokens:   %v\n  logprobs: %s\n", i+1, parsed[i], r.Tokens, formatLogprobs(r.Logprobs))
	}
	return nil
}

func formatLogprobs(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 4, 64)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
