package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"cacheon/internal/canon"
	"cacheon/internal/engine"
)

func (a *app) runEngineBench(fl engineFlags, bf benchFlags) error {
	ctx := a.ctx
	start := time.Now()
	if bf.waves < 0 || bf.waves > 1000 {
		return fmt.Errorf("--waves %d: want 1..1000", bf.waves)
	}
	if share, err := canon.ParseDecimal(bf.audit.Share); err != nil {
		return fmt.Errorf("--audit-share: %w", err)
	} else if f, _ := share.Float64(); f < 0 || f > 1 {
		return fmt.Errorf("--audit-share %s: want a decimal in [0, 1]", share)
	} else {
		bf.audit.Share = string(share)
	}
	if bf.audit.Every < 0 || bf.audit.MaxDumps < 0 {
		return errors.New("--audit-every and --audit-max must be >= 0")
	}
	auditing := bf.audit.Every > 0 || bf.audit.Share != "0"
	if bf.auditDir != "" && !auditing {
		bf.audit.Every = 1
		auditing = true
	}
	if bf.auditDir != "" {
		if st, err := os.Stat(bf.auditDir); err == nil && !st.IsDir() {
			return fmt.Errorf("--audit-dir %s is not a directory", bf.auditDir)
		}
		if ents, err := os.ReadDir(bf.auditDir); err == nil && len(ents) > 0 {
			return fmt.Errorf("--audit-dir %s is not empty", bf.auditDir)
		}
	}
	prog := newProgress(a.stderr)
	defer prog.done()
	var audit *engine.Audit
	if auditing {
		audit = &bf.audit
	}
	cfg, err := a.sessionConfig(fl, audit, prog)
	if err != nil {
		return err
	}
	s, err := a.openSession(ctx, cfg)
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	opts := engine.BenchOptions{Waves: bf.waves, Warmup: bf.warmup, WaveTimeout: fl.timeout, Progress: prog.line}
	res, err := s.Bench(ctx, opts)
	if err != nil {
		return err
	}
	h := s.Engine.Hello
	rep := &engineBenchReport{Arena: s.Arena.Name, ArenaDigest: s.Digest, Workload: s.Arena.WorkloadName, Device: s.Arena.Device,
		DType: s.Arena.DType, Graphs: s.Graphs, Strict: s.Strict, Python: h.Python, Torch: h.Torch,
		DeviceName: h.DeviceName, Sandbox: s.Sandbox, Stack: s.Stack, Loaded: s.Loaded, Bench: res, NeverFired: s.NeverFired(res)}
	if rep.Stack == nil {
		rep.Stack = []engine.StackRow{}
	}
	if auditing {
		prog.line("regrading audit dumps")
		slots, _, err := catalogs()
		if err != nil {
			return withCode(ExitInfra, err)
		}
		if rep.Audit, err = s.Regrade(slots, bf.auditDir); err != nil {
			return withCode(ExitInfra, err)
		}
		rep.AuditSlots = engine.SummarizeAudit(rep.Audit)
	}
	closed = true
	if err := s.Close(); err != nil {
		return withCode(ExitInfra, err)
	}
	if len(cfg.Stack) > 0 && bf.stock {
		if rep.StockTokens, err = s.CompareWithStock(ctx, cfg, opts, res); err != nil {
			return err
		}
		if c := rep.StockTokens; !c.Match {
			prog.done()
			fmt.Fprintf(a.stderr, "WARNING: %s\n", stockDiffers(c))
		}
	}
	prog.done()
	rep.Seconds = time.Since(start).Seconds()
	if bf.json {
		if err := writeJSON(a.stdout, rep); err != nil {
			return err
		}
	} else {
		printEngineBench(a.stdout, rep)
	}
	for _, r := range rep.Audit {
		if r.Outcome != engine.AuditPass {
			return silentExit{ExitFindings}
		}
	}
	return nil
}
