package arenas

import (
	"fmt"
	"os"
	"strings"

	"cacheon/internal/arena"
)

// Resolve loads an arena file, or a shipped arena by name. A shipped arena
// resolves relative paths (a checkpoint) against the working directory.
func Resolve(arg string) (*arena.Arena, error) {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		return arena.Load(arg)
	}
	if b, ok := Lookup(arg); ok {
		a, err := arena.Parse("arenas/"+arg+".toml", b)
		if err != nil {
			return nil, err
		}
		if a.Dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("arena %s: %w", arg, err)
		}
		return a, nil
	}
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return nil, fmt.Errorf("--arena %q: is a directory; want an arena .toml file or a shipped arena name (%s)", arg, strings.Join(Names(), ", "))
	}
	return nil, fmt.Errorf("--arena %q: no such file and no shipped arena of that name (shipped: %s)", arg, strings.Join(Names(), ", "))
}

// Shipped parses every shipped arena, in name order.
func Shipped() ([]*arena.Arena, error) {
	var out []*arena.Arena
	for _, name := range Names() {
		b, _ := Lookup(name)
		a, err := arena.Parse("arenas/"+name+".toml", b)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
