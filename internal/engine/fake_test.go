package engine

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"cacheon/internal/worker"
)

// fakeEngine is a hand-written arena runtime that speaks the engine
// protocol in-process. Its knobs script failures; its self-reported profile
// is deliberately absurd so that tests can tell host time from its claims.
type fakeEngine struct {
	perToken    time.Duration // sleep per generated token of the longest request
	dieAt       int           // generate number (1-based) at which the process dies silently
	candidateAt int           // generate number at which it replies candidate_error
	shortAt     int           // generate number at which it returns too few tokens
	loadFail    string        // class of a load failure, "" = ok
	// tensor parallel: the rank and world size it answers with (0 of 1
	// when world is 0), a generate that never returns until the process
	// is killed, generated tokens shifted by one
	rank, world int
	hang, skew  bool
	// skewStats makes the stats reply count one more selected call
	skewStats bool
	killed    chan struct{}
	groupReq  map[string]any

	mu        sync.Mutex
	generates int
	loadReq   map[string]any
	argv      []string
}

// Start implements worker.Starter.
func (f *fakeEngine) Start(_ context.Context, argv, _ []string, _ string) (worker.Process, error) {
	f.argv = argv
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	f.killed = make(chan struct{})
	p := &fakeProc{stdin: inW, stdout: outR, stderr: errR, done: make(chan struct{}), killed: f.killed}
	go func() {
		defer close(p.done)
		defer outW.Close()
		defer errW.Close()
		defer inR.Close()
		f.serve(inR, outW, errW)
	}()
	return p, nil
}

type fakeProc struct {
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	stderr *io.PipeReader
	done   chan struct{}
	once   sync.Once
	killed chan struct{} // closed by Kill
}

func (p *fakeProc) Stdin() io.WriteCloser { return p.stdin }
func (p *fakeProc) Stdout() io.Reader     { return p.stdout }
func (p *fakeProc) Stderr() io.Reader     { return p.stderr }
func (p *fakeProc) Wait() error {
	<-p.done
	return errors.New("exit status 139")
}
func (p *fakeProc) Kill() {
	p.once.Do(func() {
		close(p.killed)
		p.stdin.CloseWithError(errors.New("killed"))
		p.stdout.CloseWithError(errors.New("killed"))
	})
}

func (f *fakeEngine) serve(in io.Reader, out, errw io.Writer) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	vocab := 512
	for sc.Scan() {
		var req map[string]any
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintln(errw, "bad json:", err)
			return
		}
		id := req["id"]
		reply := map[string]any{"id": id, "ok": true}
		switch req["op"] {
		case "hello":
			reply["python"], reply["torch"], reply["cuda"], reply["device_name"], reply["triton"], reply["pid"] = "3.11", "fake", false, "fake-cpu", nil, 7
		case "load":
			f.mu.Lock()
			f.loadReq = req
			f.mu.Unlock()
			if f.loadFail != "" {
				reply = failure(id, f.loadFail, "ImportError", "no module named kernels")
				break
			}
			a := req["arena"].(map[string]any)
			m := a["model"].(map[string]any)
			vocab = int(m["vocab_size"].(float64))
			reply["params"], reply["layers"], reply["device"], reply["dtype"] = 12345, m["num_layers"], "cpu", a["dtype"]
			reply["rank"], reply["world_size"] = f.rank, max(1, f.world)
			reply["kv_pages"], reply["graph_buckets"] = a["engine"].(map[string]any)["kv_pages"], []int{1, 2}
		case "group":
			f.mu.Lock()
			f.groupReq = req
			f.mu.Unlock()
			reply["rank"], reply["world_size"] = f.rank, f.world
		case "generate":
			f.mu.Lock()
			f.generates++
			n := f.generates
			f.mu.Unlock()
			if f.hang {
				<-f.killed // blocked in a collective a failed rank never joins
				return
			}
			if n == f.dieAt {
				fmt.Fprintln(errw, "Fatal Python error: Segmentation fault")
				return
			}
			if n == f.candidateAt {
				reply = failure(id, ClassCandidate, "RuntimeError", "kernel exploded after selection")
				break
			}
			reply["results"], reply["steps"] = f.generate(req, vocab, n == f.shortAt)
		case "score":
			var nll [][]float64
			for i, s := range req["sequences"].([]any) {
				k := int(req["from"].([]any)[i].(float64))
				row := make([]float64, len(s.([]any))-k)
				for j := range row {
					row[j] = 0.25
				}
				nll = append(nll, row)
			}
			reply["nll"] = nll
		case "stats":
			reply["slots"] = map[string]any{
				"norm.rmsnorm":            map[string]int{"selected": 0, "completed": 0, "fallback": 0, "ineligible": 0, "audited": 0, "stock": 40},
				"activation.silu_and_mul": map[string]int{"selected": 20, "completed": 20, "fallback": 0, "ineligible": 0, "audited": 2, "stock": 0},
			}
			if f.skewStats {
				reply["slots"].(map[string]any)["activation.silu_and_mul"] = map[string]int{"selected": 21, "completed": 21, "audited": 2}
			}
			reply["receipts"] = []any{}
			reply["profile"] = map[string]any{"mode": "eager", "decode": map[string]any{"tokens_per_s": 1e9}}
		case "shutdown":
			writeReply(out, reply)
			return
		default:
			reply = failure(id, ClassBadRequest, "", "unknown op")
		}
		writeReply(out, reply)
	}
}

func (f *fakeEngine) generate(req map[string]any, vocab int, short bool) ([]map[string]any, map[string]int) {
	var results []map[string]any
	longest := 0
	for _, r := range req["requests"].([]any) {
		rm := r.(map[string]any)
		n := int(rm["max_new_tokens"].(float64))
		longest = max(longest, n)
		if short {
			n--
		}
		sum := 0
		for _, t := range rm["prompt"].([]any) {
			sum += int(t.(float64))
		}
		if f.skew {
			sum++
		}
		toks, lps := make([]byte, 4*n), make([]byte, 4*n)
		for j := range n {
			binary.LittleEndian.PutUint32(toks[4*j:], uint32((sum+7*j)%vocab))
			binary.LittleEndian.PutUint32(lps[4*j:], math.Float32bits(-0.5))
		}
		results = append(results, map[string]any{"rid": rm["rid"], "tokens_i32": base64.StdEncoding.EncodeToString(toks),
			"logprobs_f32": base64.StdEncoding.EncodeToString(lps)})
	}
	time.Sleep(time.Duration(longest) * f.perToken)
	return results, map[string]int{"prefill": 1, "decode": longest - 1}
}

func failure(id any, class, typ, msg string) map[string]any {
	return map[string]any{"id": id, "ok": false, "error": map[string]any{"class": class, "type": typ, "message": msg, "traceback": ""}}
}

func writeReply(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}

// fakeRanks starts the fake ranks of a tensor-parallel engine in order,
// one per Start.
type fakeRanks struct {
	ranks []*fakeEngine
	next  int
}

// Start implements worker.Starter.
func (r *fakeRanks) Start(ctx context.Context, argv, env []string, dir string) (worker.Process, error) {
	f := r.ranks[r.next]
	f.rank, f.world = r.next, len(r.ranks)
	r.next++
	return f.Start(ctx, argv, env, dir)
}
