package engine

import (
	"context"
	"testing"
)

// This file lends the external test package engine_test (staging_test.go,
// which imports verify and so cannot live inside package engine: verify's
// served stage imports the engine) what it needs of the engine's insides.

// RealRuntime is realRuntime for engine_test.
func RealRuntime(t *testing.T) (python, parent string) {
	t.Helper()
	return realRuntime(t)
}

// StagedSession is a session whose job directory is open and whose stack
// is admitted, as Open leaves them before the engine starts.
type StagedSession struct {
	*Session
	Stack     map[string]SlotEntry
	StackRoot string
}

// Scratch is the session's job directory.
func (s *StagedSession) Scratch() string { return s.scratch }

// Work is the session's workers directory.
func (s *StagedSession) Work() string { return s.work }

// StageSession opens a session's job directory under root and admits c's
// stack into it; the session is closed when the test ends.
func StageSession(ctx context.Context, t *testing.T, python, root string, c Config) *StagedSession {
	t.Helper()
	s := &Session{Python: python}
	if err := s.openJob(root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	stack, stackRoot, err := s.admitStack(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return &StagedSession{Session: s, Stack: stack, StackRoot: stackRoot}
}
