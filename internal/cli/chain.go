package cli

// chain serve: run the embedded local chain and its HTTP API.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"cacheon/internal/market/localchain"
)

func (a *app) chainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chain",
		Short: "Run the embedded local chain (blocks, finality, commit/reveal, weights)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(a.chainServeCommand())
	return cmd
}

func (a *app) chainServeCommand() *cobra.Command {
	var (
		dir, listen, urlFile string
		blockTime            time.Duration
		finality             uint64
		maxUIDs              int
		validators           []string
		asJSON               bool
	)
	cmd := &cobra.Command{
		Use:   "serve --dir DIR [--listen 127.0.0.1:0] [--block-time 1s] [--finality 2]",
		Short: "Produce blocks and serve the chain's HTTP API until interrupted",
		Long: `serve opens (or creates) the local chain in DIR (DIR/chain.db, SQLite, the
directory 0700 and the file 0600), produces a block every --block-time, and
answers the chain's HTTP JSON API on --listen (loopback by default; port 0
picks a free port). Its first line on standard output is the API's URL
(with --json, a JSON object {"url", "genesis", ...}), so scripts can read
it; --url-file also writes the URL to a file. The finalized head is head
minus --finality, fixed when the chain is created. --validator HOTKEY
(repeatable) allows a registered hotkey to set weights. SIGINT or SIGTERM
stops it gracefully: the API drains, the block in progress is written or
not at all, and pending extrinsics no block included are dropped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return newUsageError(cmd, "--dir DIR is required")
			}
			if blockTime <= 0 {
				return newUsageError(cmd, fmt.Sprintf("--block-time %v: must be positive", blockTime))
			}
			ctx, stop := signal.NotifyContext(a.ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			c, err := localchain.Open(ctx, localchain.Options{Dir: dir, Finality: finality, MaxUIDs: maxUIDs, Validators: validators})
			switch {
			case errors.Is(err, localchain.ErrFinalityChanged), errors.Is(err, localchain.ErrLocked):
				return withCode(ExitUsage, err)
			case err != nil:
				return inputErr(err)
			}
			defer c.Close()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("chain serve: --listen %s: %w", listen, err))
			}
			url := "http://" + ln.Addr().String()
			if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
				fmt.Fprintf(a.stderr, "warning: serving the chain API on %s, beyond loopback: the API has no authentication (anyone who reaches it can read the chain and submit signed extrinsics)\n", ln.Addr())
			}
			info, err := c.Info(ctx)
			if err != nil {
				ln.Close()
				return withCode(ExitInfra, err)
			}
			if asJSON {
				err = writeJSONLine(a.stdout, map[string]any{"url": url, "genesis": info.Genesis, "head": info.Head.Number,
					"finality": info.Finality, "block_time": blockTime.String(), "dir": dir})
			} else {
				_, err = fmt.Fprintln(a.stdout, url)
			}
			if err != nil {
				ln.Close()
				return withCode(ExitInfra, err)
			}
			if urlFile != "" {
				if err := writeFileAtomic(urlFile, []byte(url+"\n")); err != nil {
					ln.Close()
					return withCode(ExitUsage, fmt.Errorf("chain serve: --url-file: %w", err))
				}
			}
			fmt.Fprintf(a.stderr, "chain %s: head %d, finality %d, a block every %v; serving %s\n", short16(info.Genesis), info.Head.Number, info.Finality, blockTime, url)
			if err := runNode(ctx, c, ln, blockTime); err != nil {
				return withCode(ExitInfra, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "data directory (holds chain.db)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address for the HTTP API")
	cmd.Flags().DurationVar(&blockTime, "block-time", time.Second, "time between blocks")
	cmd.Flags().Uint64Var(&finality, "finality", localchain.DefaultFinality, "finality depth in blocks (fixed when the chain is created)")
	cmd.Flags().IntVar(&maxUIDs, "max-uids", localchain.DefaultMaxUIDs, "metagraph size bound")
	cmd.Flags().StringArrayVar(&validators, "validator", nil, "hotkey (64 hex digits) allowed to set weights; repeatable")
	cmd.Flags().StringVar(&urlFile, "url-file", "", "also write the API's URL to this file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the startup line as JSON")
	return cmd
}

// runNode produces blocks and serves the API until ctx ends; the first
// failure of either stops both.
func runNode(ctx context.Context, c *localchain.Chain, ln net.Listener, blockTime time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- localchain.Serve(ctx, ln, c) }()
	go func() { errc <- c.Run(ctx, blockTime) }()
	var first error
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
		cancel()
	}
	if first != nil {
		return fmt.Errorf("chain serve: %w", first)
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file beside it,
// so a reader never sees a partial file.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func short16(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// writeJSONLine writes v as one line of JSON (a first line scripts read).
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
