package engine

import (
	"os"
	"testing"

	"cacheon/internal/sandbox"
)

// TestMain lets the sandbox re-execute this test binary as its confined
// child: admitting a stack bundle runs the scan's parser in the sandbox.
func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	os.Exit(m.Run())
}
