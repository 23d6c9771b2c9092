package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTimeoutNamesTheUserLimit: a request that outlives a limit set with
// WithLimit says so with the limit as the user gave it; a sooner deadline
// of the parent is not blamed on that limit.
func TestTimeoutNamesTheUserLimit(t *testing.T) {
	c := startFake(t, `read l; sleep 60`)
	ctx, cancel := WithLimit(context.Background(), 300*time.Millisecond, "--timeout")
	defer cancel()
	_, err := c.Hello(ctx)
	var te *TimeoutError
	if !errors.As(err, &te) || te.Limit != 300*time.Millisecond || te.Name != "--timeout" {
		t.Fatalf("err = %v (%#v), want a timeout naming --timeout 300ms", err, te)
	}
	if want := "worker did not answer within 300ms (--timeout 300ms) and was killed"; te.Error() != want {
		t.Fatalf("message %q, want %q", te.Error(), want)
	}

	parent, pcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer pcancel()
	inner, icancel := WithLimit(parent, time.Hour, "--timeout")
	defer icancel()
	<-inner.Done()
	if te := timeoutError(inner, time.Millisecond); te.Limit != 0 || strings.Contains(te.Error(), "--timeout") {
		t.Fatalf("a parent's sooner deadline was blamed on the limit: %v", te)
	}
}

// TestVisibleGPUs counts CUDA_VISIBLE_DEVICES entries up to the first that
// names no device.
func TestVisibleGPUs(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{
		{"0", 1}, {"0,1", 2}, {"3, 5 ,7", 3}, {"", 0}, {"-1", 0}, {"0,-1,2", 1}, {"GPU-1a2b,GPU-3c4d", 2},
	} {
		t.Setenv("CUDA_VISIBLE_DEVICES", tc.env)
		if got := VisibleGPUs(); got != tc.want {
			t.Errorf("CUDA_VISIBLE_DEVICES=%q: %d GPUs, want %d", tc.env, got, tc.want)
		}
	}
}
