package worker

import (
	"os"
	"testing"

	"cacheon/internal/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	os.Exit(m.Run())
}
