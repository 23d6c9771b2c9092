package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// RegradeRanks regrades the audit dumps of a tensor-parallel engine, whose
// rank r dumped into dirs[r] (every rank dumps the same calls). A dump of
// a one-rank slot is regraded on its own, as Regrade does; rank r's files
// are named "rank<r>/<file>" for r > 0. A collective slot's call is
// regraded from every rank's dump of it together (one result, named by
// its file): the case is rebuilt from all ranks' inputs
// (slot.CaseFromRankInputs), every rank's inputs must be unchanged by the
// call, and every rank's outputs are graded against the one reference
// (each rank must hold the whole reduction); the worst rank decides. A
// call missing from some rank's directory is a FAIL.
func RegradeRanks(dirs []string, slots SlotLookup, scalars map[string]map[string]float64) ([]AuditResult, error) {
	isCollective := func(name string) bool {
		spec, ok := slots.Lookup(name)
		return ok && spec.Kind == slot.Collective
	}
	var out []AuditResult
	calls := map[string]bool{} // collective dump names seen on any rank
	for r, dir := range dirs {
		res, err := regradeDir(dir, slots, scalars, isCollective)
		if err != nil {
			return nil, err
		}
		for i := range res {
			if r > 0 {
				res[i].File = filepath.Join(fmt.Sprintf("rank%d", r), res[i].File)
			}
		}
		out = append(out, res...)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("audit regrade: %w", err)
		}
		for _, ent := range ents {
			if m := dumpName.FindStringSubmatch(ent.Name()); m != nil && isCollective(m[1]) {
				calls[ent.Name()] = true
			}
		}
	}
	for name := range calls {
		m := dumpName.FindStringSubmatch(name)
		r := AuditResult{File: name, Slot: m[1], Outcome: AuditFail}
		r.Call, _ = strconv.Atoi(m[2])
		regradeCollective(name, dirs, slots, scalars[r.Slot], &r)
		out = append(out, r)
	}
	sortAudit(out)
	return out, nil
}

// regradeCollective regrades one collective call from every rank's dump.
func regradeCollective(name string, dirs []string, slots SlotLookup, scalars map[string]float64, r *AuditResult) {
	fail := func(format string, args ...any) { r.Outcome, r.Reason = AuditFail, fmt.Sprintf(format, args...) }
	spec, ok := slots.Lookup(r.Slot)
	if !ok {
		fail("unknown slot %s", r.Slot)
		return
	}
	files := make([]*safetensors.File, len(dirs))
	inputs := make([]map[string]*tensor.Tensor, len(dirs))
	for rank, dir := range dirs {
		path := filepath.Join(dir, name)
		if st, err := os.Lstat(path); err != nil || !st.Mode().IsRegular() {
			fail("rank %d has no regular dump of this call", rank)
			return
		}
		f, err := safetensors.ReadFile(path, safetensors.Limits{})
		if err != nil {
			fail("rank %d: unreadable dump: %v", rank, err)
			return
		}
		md := f.Metadata
		if md["slot"] != r.Slot || md["call"] != strconv.Itoa(r.Call) || md["rank"] != strconv.Itoa(rank) || md["world_size"] != strconv.Itoa(len(dirs)) {
			fail("rank %d: metadata slot %q call %q rank %q world_size %q does not match the file and its directory", rank, md["slot"], md["call"], md["rank"], md["world_size"])
			return
		}
		in, why := dumpedInputs(spec, f)
		if why != "" {
			fail("rank %d: %s", rank, why)
			return
		}
		files[rank], inputs[rank] = f, in
	}
	c, err := spec.CaseFromRankInputs(inputs, scalars)
	if err != nil {
		fail("inputs do not fit the slot contract: %v", err)
		return
	}
	gradeDumps(spec, c, files, true, r)
}
