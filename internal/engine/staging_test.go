package engine_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cacheon/internal/bundle"
	"cacheon/internal/engine"
	"cacheon/internal/slot"
	"cacheon/internal/verify"
	"cacheon/internal/worker"
)

// loadFacts is the Python side of TestStagingLikeVerify: it imports stack
// rows from their staged bundles as the verify worker does (each bundle in
// a process of its own, host.Loader) or as the engine's dispatch does
// (every bundle in one process, each inside a bundlens.Namespace, module
// ids by (bundle, source)), and prints, for every row, what the
// candidate's modules can read of their own loading: their names, files,
// reprs, specs and the sys.modules keys of every bundle module.
const loadFacts = `
import json, sys
sys.path.insert(0, sys.argv[1])
from cacheon_runtime import host
from cacheon_runtime.engine import bundlens

def facts(root, mod, entry):
    fn = getattr(mod, entry)
    spec = mod.__spec__
    out = {"name": mod.__name__, "package": mod.__package__, "file": mod.__file__,
           "repr": repr(mod), "spec": [spec.name, spec.origin, spec.parent],
           "entry": [fn.__module__, fn.__qualname__, fn.__code__.co_filename],
           "sys_path": [p for p in sys.path if p.startswith(root)]}
    real = __import__("os").path.realpath(root)
    out["modules"] = sorted([k, (host.module_paths(v) or [""])[0]] for k, v in list(sys.modules.items())
                            if any(host.path_under(p, real) for p in host.module_paths(v)))
    return out

mode, rows = sys.argv[2], json.loads(sys.argv[3])
loader, ids, res = host.Loader(), {}, []
for bundle, source, entry in rows:
    mid = ids.setdefault((bundle, source), "m%d" % len(ids))
    if mode == "engine":
        with bundlens.Namespace(bundle, [source]):
            mod = loader.load(mid, bundle, source, entry)
    else:
        mod = loader.load(mid, bundle, source, entry)
    res.append(facts(bundle, mod, entry))
print(json.dumps(res))
`

// TestStagingLikeVerify stages the same bundles as verify stages one
// (verify.StageJob, its workers' directory worker.NewWorkDir as its pool
// makes it) and as an engine session stages its stack (openJob,
// admitStack), imports them in Python each side's way, and requires every
// fact of its own loading that candidate code can observe to be equal once
// the job directory's random name is taken out: the job and workers
// directory names, the bundle's path and the sandbox's bundle root, the
// module names (__name__, __package__, __spec__, sys.modules keys), files
// and reprs, the sys.path entry, the runtime's path and the environment
// (module_repr_path_tell, red team of session 14).
func TestStagingLikeVerify(t *testing.T) {
	python, runtimeSrc := engine.RealRuntime(t)
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	specs := []engine.StackSpec{
		{Slot: "activation.silu_and_mul", Bundle: adversarial(t, "module_repr_path_tell")},
		{Slot: "norm.rmsnorm", Bundle: adversarial(t, "control_subpackage")},
	}
	root := t.TempDir()
	jobName := regexp.MustCompile(`^cacheon-job-[0-9]+$`)
	workName := regexp.MustCompile(`^workers-[0-9]+$`)
	// norm replaces a job directory and a workers directory by placeholders.
	norm := func(s, job, work string) string {
		return strings.ReplaceAll(strings.ReplaceAll(s, work, "<work>"), job, "<job>")
	}

	// The engine: one session, every stack bundle in its job directory.
	s := engine.StageSession(ctx, t, python, root, engine.Config{Slots: cat, Stack: specs})
	stack, stackRoot := s.Stack, s.StackRoot
	eRuntime, err := worker.MaterializeRuntime(worker.JobRuntime(s.Scratch()))
	if err != nil {
		t.Fatal(err)
	}
	var engineRows [][3]string
	for _, sp := range specs {
		e := stack[sp.Slot]
		engineRows = append(engineRows, [3]string{e.Bundle, e.Source, e.Entry})
	}
	engineFacts := pyLoadFacts(t, python, runtimeSrc, "engine", engineRows)

	for i, sp := range specs {
		// Verify: a job of its own for the bundle, as Prepare makes it.
		job, staged, err := verify.StageJob(ctx, root, sp.Bundle, cat)
		if err != nil {
			t.Fatal(err)
		}
		work, err := worker.NewWorkDir(job) // verify's pool: WorkDir is the job
		if err != nil {
			t.Fatal(err)
		}
		vRuntime, err := worker.MaterializeRuntime(worker.JobRuntime(job))
		if err != nil {
			t.Fatal(err)
		}
		op := rowFor(t, staged.Bundle, sp.Slot)
		e := stack[sp.Slot]
		type seen struct{ Job, Work, Bundle, BundleRoot, Source, Entry, Runtime string }
		got := [2]seen{
			{filepath.Base(job), filepath.Base(work), norm(staged.Bundle.Dir, job, work), norm(worker.JobBundles(job), job, work),
				op.Source, op.Entry, norm(vRuntime, job, work)},
			{filepath.Base(s.Scratch()), filepath.Base(s.Work()), norm(e.Bundle, s.Scratch(), s.Work()), norm(stackRoot, s.Scratch(), s.Work()),
				e.Source, e.Entry, norm(eRuntime, s.Scratch(), s.Work())},
		}
		for side, g := range got {
			if !jobName.MatchString(g.Job) || !workName.MatchString(g.Work) {
				t.Errorf("%s (side %d): job %q, workers %q: want %s and %s", sp.Slot, side, g.Job, g.Work, jobName, workName)
			}
			g.Job, g.Work = "", ""
			got[side] = g
		}
		if filepath.Dir(job) != filepath.Dir(s.Scratch()) || filepath.Dir(work) != job || filepath.Dir(s.Work()) != s.Scratch() {
			t.Errorf("%s: verify's job %s (workers %s), the engine's %s (workers %s): want siblings with the workers inside", sp.Slot, job, work, s.Scratch(), s.Work())
		}
		if got[0] != got[1] {
			t.Errorf("%s: verify stages and loads as\n  %+v\nthe engine as\n  %+v", sp.Slot, got[0], got[1])
		}
		if want := "<job>/bundles/" + staged.ContentHash[:worker.BundleNameLen]; got[0].Bundle != want {
			t.Errorf("%s: bundle at %s, want %s", sp.Slot, got[0].Bundle, want)
		}
		vEnv := strings.Join(worker.CandidateEnv(work, 0, "cpu", true), "\n")
		eEnv := strings.Join(worker.CandidateEnv(s.Work(), 0, "cpu", true), "\n")
		if norm(vEnv, job, work) != norm(eEnv, s.Scratch(), s.Work()) {
			t.Errorf("%s: environment\n%s\nagainst the engine's\n%s", sp.Slot, vEnv, eEnv)
		}
		// What the module sees, imported each side's way.
		vf := pyLoadFacts(t, python, runtimeSrc, "verify", [][3]string{{staged.Bundle.Dir, op.Source, op.Entry}})[0]
		ef := engineFacts[i]
		if a, b := norm(string(vf), job, work), norm(string(ef), s.Scratch(), s.Work()); a != b {
			t.Errorf("%s: verify's module sees\n  %s\nthe engine's\n  %s", sp.Slot, a, b)
		}
		if !strings.Contains(string(vf), "'"+staged.Bundle.Dir+"/"+op.Source+"'") {
			t.Errorf("%s: the module's facts %s do not name its file", sp.Slot, vf)
		}
	}
}

// pyLoadFacts runs loadFacts in a fresh interpreter and returns each row's
// facts as JSON text.
func pyLoadFacts(t *testing.T, python, runtimeSrc, mode string, rows [][3]string) []json.RawMessage {
	t.Helper()
	arg, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(python, "-I", "-B", "-c", loadFacts, runtimeSrc, mode, string(arg)).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("load facts (%s): %v\n%s", mode, err, stderr)
	}
	var facts []json.RawMessage
	if err := json.Unmarshal(out, &facts); err != nil || len(facts) != len(rows) {
		t.Fatalf("load facts (%s): %v: %s", mode, err, out)
	}
	return facts
}

// rowFor is the bundle's [[ops]] row for slot, as verify's run loads it.
func rowFor(t *testing.T, b *bundle.Bundle, slotName string) bundle.Op {
	t.Helper()
	for _, op := range b.Manifest.Ops {
		if op.Slot == slotName {
			return op
		}
	}
	t.Fatalf("no row for %s in %s", slotName, b.Dir)
	return bundle.Op{}
}

// adversarial is the absolute path of a bundle of verify's adversarial
// suite.
func adversarial(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "verify", "testdata", "adversarial", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
