package verify

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"cacheon/internal/worker"
)

func TestCollectiveEnv(t *testing.T) {
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{"nothing set", []string{"PATH=/bin", "HOME=/root"}, []string{"NCCL_P2P_DISABLE=1"}},
		{"operator settings pass", []string{"NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=lo", "CUDA_VISIBLE_DEVICES=0,1"},
			[]string{"NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=lo", "NCCL_P2P_DISABLE=1"}},
		{"operator turns P2P back on", []string{"NCCL_P2P_DISABLE=0"}, []string{"NCCL_P2P_DISABLE=0"}},
		{"multicast and cuMem stay verify's", []string{"NCCL_NVLS_ENABLE=1", "NCCL_NVLSTREE_ENABLE=1", "NCCL_CUMEM_ENABLE=1", "NCCL_ALGO=Ring"},
			[]string{"NCCL_ALGO=Ring", "NCCL_P2P_DISABLE=1"}},
		{"malformed entries dropped", []string{"NCCL_DEBUG", "=x", "nccl_debug=INFO"}, []string{"NCCL_P2P_DISABLE=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := collectiveEnv(tt.environ); !slices.Equal(got, tt.want) {
				t.Errorf("collectiveEnv(%q) = %q, want %q", tt.environ, got, tt.want)
			}
		})
	}
}

// TestCallErrors: a call error and a load failure of class tamper (the
// runtime guard's finding) are the candidate's, worded as such; a raise
// keeps its wording.
func TestCallErrors(t *testing.T) {
	tamper := &worker.Failure{Class: worker.ClassTamper, Type: "TamperError",
		Message: "runtime guard: importing k.py: torch.Tensor.fill_ was replaced"}
	const want = "the runtime guard refused the candidate: importing k.py: torch.Tensor.fill_ was replaced"
	if got := callError(tamper); got != want {
		t.Errorf("callError(tamper) = %q", got)
	}
	if got, infra := failureReason(tamper, ""); got != want || infra {
		t.Errorf("failureReason(tamper) = %q, infra %v", got, infra)
	}
	// A reply that breaks the protocol after a load or run request is
	// the candidate's: its code ran in the worker and can write to the
	// worker's descriptors (fd_write_storage forged a reply line).
	forged := &worker.ProtocolError{Err: errors.New(`reply id "forged" does not match request id "3"`)}
	if got, infra := failureReason(forged, ""); infra || !strings.Contains(got, "broke the protocol after candidate code ran") {
		t.Errorf("failureReason(protocol) = %q, infra %v", got, infra)
	}
	raised := &worker.Failure{Class: worker.ClassException, Type: "ValueError", Message: "boom\nmore"}
	if got := callError(raised); got != "candidate raised ValueError: boom" {
		t.Errorf("callError(exception) = %q", got)
	}
}

// TestCandidateRanReason: once candidate code has run in a worker (a load
// or run request), an error the worker reports from its own steps (class
// internal, a write to a worker that is gone) is the candidate's failure,
// not a retry; only the run's own end stays the infrastructure's. Before
// any load (the group request) an internal error stays the
// infrastructure's.
func TestCandidateRanReason(t *testing.T) {
	internal := &worker.Failure{Class: "internal", Type: "RuntimeError",
		Message: "setStorage: ... out of bounds for storage of size 0"}
	if _, infra := failureReason(internal, ""); !infra {
		t.Fatal("failureReason(internal) is the candidate's; this test assumes the infrastructure's")
	}
	tests := []struct {
		name      string
		err       error
		cancelled bool
		wantInfra bool
		want      string
	}{
		{"internal", internal, false, false, "the worker failed after candidate code ran in its process: worker internal: setStorage"},
		{"gone", errors.New("write |1: broken pipe"), false, false, "the worker failed after candidate code ran in its process: worker: write |1: broken pipe"},
		{"raised", &worker.Failure{Class: worker.ClassException, Type: "ValueError", Message: "boom"}, false, false, "candidate raised: ValueError: boom"},
		{"cancelled", internal, true, true, "worker internal: setStorage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancelled {
				cancel()
			}
			got, infra := candidateRanReason(ctx, tt.err, "")
			if infra != tt.wantInfra || !strings.HasPrefix(got, tt.want) {
				t.Errorf("candidateRanReason = %q, infra %v; want prefix %q, infra %v", got, infra, tt.want, tt.wantInfra)
			}
		})
	}
}
