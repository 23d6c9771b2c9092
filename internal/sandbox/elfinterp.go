package sandbox

import (
	"bytes"
	"debug/elf"
	"fmt"
	"path/filepath"
)

// ElfInterpreter returns the real path of the program interpreter (the
// dynamic loader) an ELF executable names, "" for a static one. The kernel
// opens it for execution when the executable is exec'd, so a policy that
// lets a process execute only its interpreter (Policy.ExecOnly) names both.
func ElfInterpreter(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("elf interpreter of %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		buf := make([]byte, min(p.Filesz, 4096))
		if _, err := p.ReadAt(buf, 0); err != nil {
			return "", fmt.Errorf("elf interpreter of %s: %w", path, err)
		}
		name := string(bytes.TrimRight(buf, "\x00"))
		if !filepath.IsAbs(name) {
			return "", fmt.Errorf("elf interpreter of %s: %q is not an absolute path", path, name)
		}
		real, err := filepath.EvalSymlinks(name)
		if err != nil {
			return "", fmt.Errorf("elf interpreter of %s: %w", path, err)
		}
		return real, nil
	}
	return "", nil
}
