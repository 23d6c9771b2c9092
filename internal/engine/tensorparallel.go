package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"cacheon/internal/fault"
	"cacheon/internal/worker"
)

// startRanks prepares the session's ranks: one for a plain arena (the
// single-worker sandbox), or for a tensor-parallel arena one per rank, all
// started through the launcher's Group starter (one shared loopback-only
// network namespace, removed by Close). Every rank works in the session's
// one workers directory, as the ranks of a verify set share theirs, and
// gets the environment names a verify collective rank gets
// (worker.CandidateEnv with its rank, plus worker.CollectiveEnv), so that
// a kernel cannot tell serving from grading by them; a single rank gets
// rank 0's names as before.
func (s *Session) startRanks(ctx context.Context, c Config, launcher *worker.SandboxLauncher) ([]Rank, worker.Starter, error) {
	n := s.Ranks()
	var starter worker.Starter
	var err error
	if n > 1 {
		starter, s.closeNet, err = launcher.Group(ctx, n)
	} else {
		starter, err = launcher.Single(ctx)
	}
	if err != nil {
		return nil, nil, fault.InfraErr(fmt.Errorf("sandbox: %w", err))
	}
	miss, err := seedKernelCache(c.KernelCache, s.work)
	if err != nil {
		return nil, nil, fault.InfraErr(err)
	}
	s.kernelCacheMiss = miss
	ranks := make([]Rank, n)
	for r := range ranks {
		env := worker.CandidateEnv(s.work, r, s.Arena.Device, true) // the engine's stock kernels are Triton's
		if n > 1 {
			env = append(env, worker.CollectiveEnv(os.Environ())...)
		}
		ranks[r] = Rank{Dir: s.work, Env: env}
	}
	return ranks, starter, nil
}

// rankAuditDir is rank r's audit directory ("" when the session does not
// audit): rank 0's is the session's, rank r's audit-rank<r> beside it in
// the ranks' directory (the runtime's audit hook lets a rank write
// nowhere else).
func (s *Session) rankAuditDir(r int) (string, error) {
	if s.auditDir == "" {
		return "", nil
	}
	if r == 0 {
		return s.auditDir, nil
	}
	d := filepath.Join(s.work, fmt.Sprintf("audit-rank%d", r))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("rank %d audit directory: %w", r, err)
	}
	return d, nil
}

// LoadRanks is Load on every rank, each with its own audit directory
// (auditDir(r); the request's for a single process).
func (e *Engine) LoadRanks(ctx context.Context, req LoadRequest, auditDir func(rank int) (string, error)) (*Loaded, error) {
	if e.WorldSize() == 1 {
		return e.Load(ctx, req)
	}
	msgs := make([]map[string]any, e.WorldSize())
	for r := range msgs {
		rr := req
		if req.Audit.Dir != "" {
			d, err := auditDir(r)
			if err != nil {
				return nil, fault.InfraErr(err)
			}
			rr.Audit.Dir = d
		}
		msgs[r] = loadMessage(rr)
	}
	type reply struct {
		replyHead
		Loaded
	}
	rs, err := roundTripEach(e, ctx, "load", func(r int) map[string]any { return msgs[r] }, func() *reply { return new(reply) })
	if err != nil {
		return nil, err
	}
	for r, l := range rs {
		if l.Rank != r || l.WorldSize != e.WorldSize() {
			return nil, fmt.Errorf("load: rank %d replied as rank %d of %d, the engine has %d ranks", r, l.Rank, l.WorldSize, e.WorldSize())
		}
	}
	return checkLoaded(&rs[0].Loaded, req)
}
