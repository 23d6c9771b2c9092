package verify

import (
	"slices"
	"testing"
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
