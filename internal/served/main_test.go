package served

import (
	"os"
	"testing"

	"cacheon/internal/sandbox"
)

// TestMain lets the sandbox re-execute this test binary as its confined
// child: the engine's runtime and the scan's parser run in it.
func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	os.Exit(m.Run())
}
