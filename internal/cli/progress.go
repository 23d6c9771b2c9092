package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// progress prints one status line at a time to stderr: overwritten in
// place on a terminal, one line per step otherwise.
type progress struct {
	mu   sync.Mutex
	w    io.Writer
	tty  bool
	last int
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		fmt.Fprintln(p.w, s)
		return
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	pad := ""
	if p.last > len(s) {
		pad = fmt.Sprintf("%*s", p.last-len(s), "")
	}
	fmt.Fprintf(p.w, "\r%s%s", s, pad)
	p.last = len(s)
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.last > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.last, "")
	}
}
