package target

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Mode is the competition mode a bundle requests in its [competition]
// table: how its target is to be resolved.
type Mode string

// Competition modes. ModeSystem parses (legacy bundles declare it) but is
// never crownable.
const (
	ModeSlot   Mode = "slot"
	ModeAtomic Mode = "atomic"
	ModeSystem Mode = "system"
)

// Request is what a bundle asks for: its declared target and mode (both
// may be empty when the manifest has no [competition] table), the slots its
// rows fill and the features it uses.
type Request struct {
	Target   string
	Mode     Mode
	Slots    []string
	Features []string
}

// Resolve maps a request to exactly one registered target, or explains why
// it cannot. An explicit request that does not resolve to its exact members
// and allowed features fails rather than falling through to another target.
func (c *Catalog) Resolve(r Request) (*Target, error) {
	slots := uniqueSorted(r.Slots)
	if len(slots) == 0 {
		return nil, fmt.Errorf("resolve target: the bundle fills no slot")
	}
	for _, s := range slots {
		if _, ok := c.slots.Lookup(s); !ok {
			return nil, fmt.Errorf("resolve target: %q is not a registered slot (registered: %s)", s, strings.Join(c.slots.Names(), ", "))
		}
	}
	var t *Target
	switch r.Mode {
	case ModeSystem:
		return nil, fmt.Errorf("resolve target: mode %q is not crownable: whole-system proposals cannot acquire a reward title; submit one registered target delta", ModeSystem)
	case "":
		if r.Target != "" {
			return nil, fmt.Errorf("resolve target: [competition] names target %q but no mode; add mode = %q or %q", r.Target, ModeSlot, ModeAtomic)
		}
		if len(slots) != 1 {
			return nil, fmt.Errorf("resolve target: the bundle fills %d slots (%s) without a [competition] request; declare target and mode = %q for a registered atomic target", len(slots), strings.Join(slots, ", "), ModeAtomic)
		}
		t = c.targets[slots[0]]
	case ModeSlot, ModeAtomic:
		var ok bool
		t, ok = c.targets[r.Target]
		if !ok {
			return nil, fmt.Errorf("resolve target: %q is not a registered target (registered: %s)", r.Target, strings.Join(c.order, ", "))
		}
		want := Singleton
		if r.Mode == ModeAtomic {
			want = Atomic
		}
		if t.Kind != want {
			return nil, fmt.Errorf("resolve target: %s is a %s target, but mode = %q asks for a %s one", t.Name, t.Kind, r.Mode, want)
		}
	default:
		return nil, fmt.Errorf("resolve target: unknown mode %q (want %q or %q)", r.Mode, ModeSlot, ModeAtomic)
	}
	if !slices.Equal(slots, t.Members) {
		return nil, fmt.Errorf("resolve target: %s has members [%s] but the bundle fills [%s]; a target's delta must cover exactly its members", t.Name, strings.Join(t.Members, ", "), strings.Join(slots, ", "))
	}
	for _, f := range uniqueSorted(r.Features) {
		if !slices.Contains(Vocabulary(), f) {
			return nil, fmt.Errorf("resolve target: unknown feature %q (vocabulary: %s)", f, strings.Join(Vocabulary(), ", "))
		}
		if !slices.Contains(t.Features, f) {
			return nil, fmt.Errorf("resolve target: %s does not allow feature %q (allowed: %s)", t.Name, f, strings.Join(t.Features, ", "))
		}
	}
	return t, nil
}

// Activate returns the active target set after making name active over
// active: targets that name displaces leave, and the transition is refused
// when it would split an active atomic target (activating a target that an
// active target displaces) or name is unregistered. The result is sorted.
func (c *Catalog) Activate(active []string, name string) (next, displaced []string, err error) {
	t, ok := c.targets[name]
	if !ok {
		return nil, nil, fmt.Errorf("activate: %q is not a registered target", name)
	}
	for _, a := range active {
		other, ok := c.targets[a]
		if !ok {
			return nil, nil, fmt.Errorf("activate: active target %q is not registered", a)
		}
		if a != name && slices.Contains(other.Displaces, name) {
			return nil, nil, fmt.Errorf("activate %s: would split active atomic target %s, which owns %s", name, a, strings.Join(other.Members, " and "))
		}
	}
	for _, a := range active {
		if slices.Contains(t.Displaces, a) {
			displaced = append(displaced, a)
			continue
		}
		if a != name {
			next = append(next, a)
		}
	}
	next = append(next, name)
	sort.Strings(next)
	sort.Strings(displaced)
	return next, displaced, nil
}

// Owner returns the active target that serves slot s: the first target in
// precedence order whose members include s. ok is false when the stock path
// serves it.
func (c *Catalog) Owner(active []string, s string) (string, bool) {
	var cands []string
	for _, a := range active {
		if t := c.targets[a]; t != nil && slices.Contains(t.Members, s) {
			cands = append(cands, a)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	sort.Strings(cands)
	if p := c.targets[cands[0]].Precedence; len(p) > 0 {
		for _, name := range p {
			if slices.Contains(cands, name) {
				return name, true
			}
		}
	}
	return cands[0], true
}

func uniqueSorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return slices.Compact(out)
}
