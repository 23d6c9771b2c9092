package fielderr

import (
	"errors"
	"io/fs"
	"testing"
)

func TestError(t *testing.T) {
	cause := errors.New("boom")
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{"everything", Problem{File: "manifest.toml", Line: 3, Col: 10, Path: "ops[0].variant", Msg: "bad", Err: cause, Hint: "fix it"},
			"manifest.toml:3:10: ops[0].variant: bad: boom (hint: fix it)"},
		{"no position", Problem{File: "manifest.toml", Path: "ops[2].source", Msg: "bad"}, "manifest.toml: ops[2].source: bad"},
		{"column without line is no position", Problem{File: "a.toml", Col: 4, Msg: "bad"}, "a.toml: bad"},
		{"no path", Problem{File: "a.toml", Line: 1, Col: 1, Msg: "bad"}, "a.toml:1:1: bad"},
		{"no file", Problem{Path: "capabilities.head_dim", Msg: "bad", Hint: "use a list"}, "capabilities.head_dim: bad (hint: use a list)"},
		{"message only", Problem{Msg: "bad"}, "bad"},
		{"cause only", Problem{File: "a.toml", Msg: "cannot read", Err: cause}, "a.toml: cannot read: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Error(); got != tt.want {
				t.Fatalf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUnwrap(t *testing.T) {
	err := error(&Problem{Msg: "cannot read", Err: fs.ErrNotExist})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("cause not unwrapped")
	}
}
