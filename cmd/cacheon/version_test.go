package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStampedRevision builds cacheon as run.sh does, without VCS stamping
// (-buildvcs=false) but with the revision stamped by -ldflags -X, and
// checks that cacheon version reports it: the variable names run.sh uses
// are the ones main declares.
func TestStampedRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "cacheon")
	const rev = "0123456789abcdef0123456789abcdef01234567"
	build := exec.Command("go", "build", "-buildvcs=false",
		"-ldflags", "-X main.revision="+rev+" -X main.modified=true", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("cacheon version: %v", err)
	}
	var info map[string]string
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if info["revision"] != rev || info["modified"] != "true" {
		t.Fatalf("version %v, want revision %s (modified)", info, rev)
	}
	if txt, err := exec.Command(bin, "version").Output(); err != nil || !strings.Contains(string(txt), "revision 0123456789ab+dirty") {
		t.Fatalf("cacheon version: %q %v", txt, err)
	}
}
