package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"cacheon/internal/safetensors"
	"cacheon/internal/tensor"
)

// BenchmarkProtocolRoundTrip measures the Go↔worker overhead of one call
// on a 1 MiB tensor: Go writes the input safetensors file, sends the run
// request, the worker loads the input, allocates and poisons the output,
// calls a trivial entry (out.copy_(x)), dumps outputs and inputs-after, and
// Go reads the dump back through the strict reader. The kernel itself is a
// 1 MiB copy, so nearly all the time is protocol.
func BenchmarkProtocolRoundTrip(b *testing.B) {
	python, err := FindPython(context.Background(), "")
	if err != nil {
		b.Skip(err)
	}
	tmp, err := os.MkdirTemp(shmOrTemp(), "bench-*")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	bundleDir := filepath.Join(tmp, "bundle")
	if err := os.MkdirAll(bundleDir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundleDir, "kcopy.py"), []byte("def kcopy(x, out):\n    out.copy_(x)\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	parent, err := MaterializeRuntime(filepath.Join(tmp, "rt"))
	if err != nil {
		b.Fatal(err)
	}
	job := filepath.Join(tmp, "job")
	if err := os.Mkdir(job, 0o700); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, PlainStarter{}, Options{Python: python, RuntimeParent: parent, Dir: job})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	if _, err := c.Hello(ctx); err != nil {
		b.Fatalf("%v\n%s", err, c.Stderr())
	}
	if err := c.Load(ctx, "m0", bundleDir, "kcopy.py", "kcopy", ""); err != nil {
		b.Fatal(err)
	}
	const n = 1 << 18 // float32: 1 MiB
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = float64(i%1000) / 7
	}
	x, err := tensor.FromFloat64(tensor.F32, []int{512, 512}, vals)
	if err != nil {
		b.Fatal(err)
	}
	req := RunRequest{
		Module: "m0", Device: "cpu", Entry: "kcopy",
		Args:    []RunArg{{Name: "x", Kind: "input"}, {Name: "out", Kind: "output"}},
		Outputs: []OutputSpec{{Name: "out", DType: "float32", Shape: []int{512, 512}, Stride: []int{512, 1}, Alignment: 16}},
		Inputs:  "in.safetensors", Dir: job,
	}
	b.SetBytes(4 << 20) // in, out, dumped out, dumped input-after
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := safetensors.WriteScratch(filepath.Join(job, "in.safetensors"), map[string]*tensor.Tensor{"x": x}); err != nil {
			b.Fatal(err)
		}
		rep, err := c.Run(ctx, req)
		if err != nil {
			b.Fatalf("%v\n%s", err, c.Stderr())
		}
		f, err := safetensors.ReadFile(filepath.Join(job, rep.Calls[0].File), safetensors.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Tensors["out"].Data) != 4*n {
			b.Fatal("short output")
		}
	}
}

// shmOrTemp returns /dev/shm when present (as cacheon's scratch choice),
// else the temp directory.
func shmOrTemp() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}
