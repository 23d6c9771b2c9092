package worker

import (
	"context"
	"fmt"
)

// Failure is a worker's ok=false reply: a classified claim, not a verdict.
type Failure struct {
	Class     string `json:"class"`
	Type      string `json:"type,omitempty"`
	Message   string `json:"message,omitempty"`
	Traceback string `json:"traceback,omitempty"`
}

func (f *Failure) Error() string {
	if f.Type != "" {
		return fmt.Sprintf("%s: %s: %s", f.Class, f.Type, f.Message)
	}
	return fmt.Sprintf("%s: %s", f.Class, f.Message)
}

// Hello is the worker's description of its environment (facts, not trusted
// for anything but diagnostics and device choice).
type Hello struct {
	ID          string  `json:"id"`
	OK          bool    `json:"ok"`
	Python      string  `json:"python"`
	Torch       string  `json:"torch"`
	CUDA        bool    `json:"cuda"`
	DeviceCount int     `json:"device_count"`
	Triton      *string `json:"triton"`
	PID         int     `json:"pid"`
	// AuditHook says the runtime's PEP 578 audit hook is installed (it is
	// armed by the first load): a sandbox layer of its own (AuditHookLayer).
	AuditHook bool `json:"audit_hook"`
}

// Classes of a call's error (CallFacts.Error) and of a tamper failure.
const (
	// ClassException: the candidate raised.
	ClassException = "exception"
	// ClassTamper: the runtime guard found that candidate code changed how
	// the process's torch behaves (a mode, a replaced function, a
	// registered kernel, a subclass swapped onto a tensor) or the audit
	// hook refused one of its operations. Also a load failure class.
	ClassTamper = "tamper"
)

// AuditHookDetail is what the runtime's audit hook covers.
const AuditHookDetail = "python PEP 578: files, exec, dlopen, subprocess, sockets, pickle, type setattr"

// AuditHookLayer is the sandbox-layer line of the runtime's audit hook, for
// reports: applied when every runtime process started reported it in its
// hello (and at least one started).
func AuditHookLayer(started, reported int) string {
	switch {
	case started == 0:
		return "audit-hook: NOT APPLIED (no runtime process started)"
	case reported < started:
		return fmt.Sprintf("audit-hook: NOT APPLIED (%d of %d runtime processes reported it: their Python lacks sys.addaudithook)", reported, started)
	}
	return "audit-hook: applied (" + AuditHookDetail + ")"
}

// Hello asks the worker to describe itself.
func (c *Client) Hello(ctx context.Context) (*Hello, error) {
	var h Hello
	if _, err := c.Call(ctx, map[string]any{"op": "hello"}, &h); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	return &h, nil
}

// InitDevice asks the worker to initialise device ("cuda": the first CUDA
// allocation and a synchronize), before any candidate runs, so that its
// cost is measured apart from the candidate's first call; on "cpu" there
// is nothing to do. It is a hello request with the device named.
func (c *Client) InitDevice(ctx context.Context, device string) error {
	if device != "cuda" {
		return nil
	}
	if _, err := c.Call(ctx, map[string]any{"op": "hello", "init_device": device}, &Hello{}); err != nil {
		return fmt.Errorf("device init: %w", err)
	}
	return nil
}

// Load imports one bundle source as module name.
func (c *Client) Load(ctx context.Context, module, bundleDir, source, entry, prepare string) error {
	_, err := c.LoadEntry(ctx, module, bundleDir, source, entry, prepare)
	return err
}

// Param is one parameter of a loaded entry as the worker reports it (a
// claim, used only to refuse an entry that cannot take the slot's
// arguments). Kind is "positional", "var_positional", "keyword_only" or
// "var_keyword"; Default says whether it has a default value.
type Param struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Default bool   `json:"default"`
}

// Loaded is the worker's reply to a load request.
type Loaded struct {
	ID string `json:"id"`
	OK bool   `json:"ok"`
	// EntryParams are the entry's parameters in order; nil when the worker
	// could not tell.
	EntryParams []Param `json:"entry_params"`
}

// LoadEntry imports one bundle source as module name, as Load does, and
// returns what the worker reports about the entry.
func (c *Client) LoadEntry(ctx context.Context, module, bundleDir, source, entry, prepare string) (*Loaded, error) {
	var l Loaded
	_, err := c.Call(ctx, map[string]any{
		"op": "load", "module": module, "bundle": bundleDir, "source": source, "entry": entry, "prepare": prepare,
	}, &l)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// Group initializes torch.distributed in the worker.
func (c *Client) Group(ctx context.Context, backend, initMethod string, rank, worldSize, localRank int, device string) error {
	_, err := c.Call(ctx, GroupMessage(backend, initMethod, rank, worldSize, localRank, device, nil), nil)
	return err
}

// GroupMessage is the group request of one rank: join the process group
// (once; the same request again is a no-op) and, with subgroups (a
// partition of the ranks into two or more non-empty parts), create every
// subgroup in order on this rank, also those it is not in, before any
// load. Every rank is sent its request before any reply is awaited: the
// rendezvous and each subgroup's creation wait for all ranks.
func GroupMessage(backend, initMethod string, rank, worldSize, localRank int, device string, subgroups [][]int) map[string]any {
	m := map[string]any{
		"op": "group", "backend": backend, "init_method": initMethod, "rank": rank,
		"world_size": worldSize, "local_rank": localRank, "device": device,
	}
	if subgroups != nil {
		m["subgroups"] = subgroups
	}
	return m
}

// RunArg is one positional argument in a run request.
type RunArg struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"`
	Type  string   `json:"type,omitempty"`
	Value *float64 `json:"value,omitempty"`
}

// OutputSpec is the validator-owned allocation contract of one output.
type OutputSpec struct {
	Name      string `json:"name"`
	DType     string `json:"dtype"`
	Shape     []int  `json:"shape"`
	Stride    []int  `json:"stride"`
	Alignment int    `json:"alignment"`
}

// RunRequest is one case.
type RunRequest struct {
	// Slot names the slot the entry serves: the worker hands each slot its
	// own scalar objects, as the engine does (argplan.Scalars).
	Slot         string       `json:"slot,omitempty"`
	Module       string       `json:"module"`
	Device       string       `json:"device"`
	Entry        string       `json:"entry"`
	Prepare      string       `json:"prepare"`
	Args         []RunArg     `json:"args"`
	PrepareArgs  []string     `json:"prepare_args"`
	Outputs      []OutputSpec `json:"outputs"`
	Inputs       string       `json:"inputs"`
	Replays      []string     `json:"replays"`
	Graph        bool         `json:"graph"`
	GraphReplays []string     `json:"graph_replays"`
	// Decoys are files (in Dir) of other layers' state of the same
	// shapes (slot.Case.Decoy): each holds the LayerArgs inputs. With a
	// prepare the worker prepares the first before the case's own state
	// and the rest after it; without, it places each decoy's inputs in
	// memory of their own. It keeps every decoy alive and calls the entry
	// with them, ungraded, as DecoyCalls says.
	Decoys []string `json:"decoys,omitempty"`
	// LayerArgs names the inputs a decoy holds (slot.Spec.LayerArgs);
	// absent: PrepareArgs.
	LayerArgs []string `json:"layer_args,omitempty"`
	// DecoyFeeds are files (in Dir), one per decoy call in order, of the
	// call's own activations (slot.Case.Feed): inputs the worker writes
	// in the case's memory before the call, and NAME@at / NAME@rows pairs
	// that grow the called decoy's layer input NAME (slot.Grow). Absent:
	// decoy calls take the case's current inputs.
	DecoyFeeds []string `json:"decoy_feeds,omitempty"`
	// DecoyCalls says how many ungraded calls with decoys' states (in
	// decoy order, cycling) precede each graded eager call: entry 0 the
	// first call, entry i replay i, and one entry past the replays the CUDA
	// graph's capture (slot.Case.DecoyCalls). Absent: one before the first
	// call and one before the first replay.
	DecoyCalls []int `json:"decoy_calls,omitempty"`
	// DecoyDumps numbers decoy calls (0 to the sum of DecoyCalls − 1, in
	// the order they are made) whose outputs the worker writes, after the
	// call returns and the guard has checked it, to
	// decoy-<n>.safetensors in Dir (the outputs only, as a graded call's
	// dump holds them), for Go to grade (slot.Case.DecoySample).
	DecoyDumps []int  `json:"decoy_dumps,omitempty"`
	Dir        string `json:"dir"`
	// CheckObjects asks the worker to compare torch's classes, functions
	// and module bindings with its start after the case (guard.objects:
	// tens of milliseconds, so verify asks on a row's first and last case;
	// a patch that persists is still there at the last).
	CheckObjects bool `json:"check_objects"`
	// Place seeds where the worker places the case's inputs in memory
	// (an allocation of their own or an offset in a larger one); 0 lets
	// the worker draw. Go derives it from the run's secret seed, so a run
	// is reproducible from its seed and a kernel learns nothing from it.
	Place uint64 `json:"place"`
	// Packed, when set, places the inputs it names as views of packed
	// buffers (slot.Packing): rows [Before, Before+n) of Before+n+After
	// rows, the rooms filled with the input's rows repeated and dumped
	// after every call as in.room_before.NAME and in.room_after.NAME.
	Packed *Packing `json:"packed,omitempty"`
	// Chain maps an output to the input serving hands the next call in
	// that output's memory (slot.Spec.Chained: the residual stream). Each
	// eager replay passes the input in the memory the call before wrote
	// the output in, the replay's values written there, and takes the
	// output in fresh memory (where the output is contiguous, of the
	// input's shape and dtype, and the input neither packed nor missing
	// from the replay's file).
	Chain map[string]string `json:"chain,omitempty"`
	// ProcessGroup says which group a "group" arg hands the kernel:
	// GroupWorld ("" sends none: the worker's default) or GroupSub, the
	// rank's subgroup of the partition its group request made
	// (docs/worker-protocol.md, "group").
	ProcessGroup string `json:"process_group,omitempty"`
}

// The groups RunRequest.ProcessGroup names.
const (
	GroupWorld = "world"
	GroupSub   = "sub"
)

// Packing is RunRequest.Packed.
type Packing struct {
	Names  []string `json:"names"`
	Before int      `json:"before"`
	After  int      `json:"after"`
}

func (r RunRequest) message() map[string]any {
	m := map[string]any{
		"op": "run", "module": r.Module, "device": r.Device, "entry": r.Entry, "prepare": r.Prepare,
		"args": r.Args, "prepare_args": nonNil(r.PrepareArgs), "outputs": r.Outputs, "inputs": r.Inputs,
		"replays": nonNil(r.Replays), "graph": r.Graph, "graph_replays": nonNil(r.GraphReplays), "dir": r.Dir,
		"check_objects": r.CheckObjects, "place": r.Place,
	}
	if r.Packed != nil {
		m["packed"] = r.Packed
	}
	if len(r.Decoys) > 0 {
		m["decoys"] = r.Decoys
	}
	if len(r.DecoyCalls) > 0 {
		m["decoy_calls"] = r.DecoyCalls
	}
	if len(r.DecoyDumps) > 0 {
		m["decoy_dumps"] = r.DecoyDumps
	}
	if len(r.LayerArgs) > 0 {
		m["layer_args"] = r.LayerArgs
	}
	if len(r.DecoyFeeds) > 0 {
		m["decoy_feeds"] = r.DecoyFeeds
	}
	if len(r.Chain) > 0 {
		m["chain"] = r.Chain
	}
	if r.ProcessGroup != "" {
		m["process_group"] = r.ProcessGroup
	}
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Identity is the storage identity of one tensor as the worker saw it.
type Identity struct {
	DataPtr       uint64 `json:"data_ptr"`
	StoragePtr    uint64 `json:"storage_ptr"`
	StorageOffset int64  `json:"storage_offset"`
	Shape         []int  `json:"shape"`
	Stride        []int  `json:"stride"`
	DType         string `json:"dtype"`
	Device        string `json:"device"`
}

// CallFacts are the raw facts of one call.
type CallFacts struct {
	Call   int                 `json:"call"`
	Phase  string              `json:"phase"` // eager, replay, graph_replay
	File   string              `json:"file"`
	Before map[string]Identity `json:"before"`
	After  map[string]Identity `json:"after"`
	Error  *Failure            `json:"error"`
}

// RunReply is the worker's reply to a run request.
type RunReply struct {
	ID    string      `json:"id"`
	OK    bool        `json:"ok"`
	Calls []CallFacts `json:"calls"`
}

// SendRun sends a run request without waiting (for unsynchronised bursts).
func (c *Client) SendRun(r RunRequest) (string, error) { return c.Send(r.message()) }

// ReceiveRun waits for the reply to a SendRun. A call error of a class
// other than ClassException or ClassTamper makes the reply an error.
func (c *Client) ReceiveRun(ctx context.Context, id string) (*RunReply, error) {
	var rr RunReply
	if err := c.Receive(ctx, id, &rr); err != nil {
		return nil, err
	}
	if err := rr.check(); err != nil {
		return nil, err
	}
	return &rr, nil
}

// check validates what the decoder cannot: every call error's class. A
// class the protocol does not name breaks it (*ProtocolError).
func (rr *RunReply) check() error {
	for _, cf := range rr.Calls {
		if cf.Error != nil && cf.Error.Class != ClassException && cf.Error.Class != ClassTamper {
			return &ProtocolError{Err: fmt.Errorf("run reply %s: call %d has an error of unknown class %q", rr.ID, cf.Call, cf.Error.Class)}
		}
	}
	return nil
}

// Run sends one case and waits for its facts.
func (c *Client) Run(ctx context.Context, r RunRequest) (*RunReply, error) {
	id, err := c.SendRun(r)
	if err != nil {
		return nil, err
	}
	return c.ReceiveRun(ctx, id)
}
