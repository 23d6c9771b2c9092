package bundle

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"cacheon/internal/capability"
	"cacheon/internal/nofollow"
	"cacheon/internal/slot"
	"cacheon/internal/target"
)

// Bundle is a loaded, checked bundle directory.
type Bundle struct {
	// Dir is the bundle root with any symlinks in the given name resolved.
	Dir      string
	Manifest Manifest
}

// Load reads and checks dir/manifest.toml against the slot catalog and
// resolves every [[ops]] row, including its capability domain.
//
// Decoding is strict (unknown keys and wrong types are errors). Names must
// be identifiers; every declared file must be a relative path inside the
// bundle that exists as a regular file, with no symlink anywhere on its path,
// and be covered by the content hash. Registration checks reject an unknown
// slot, a prepare that the slot does not take (or a missing one it needs),
// an empty capability domain, a predicate on a field the slot's live binding
// never supplies, duplicate (slot, variant) pairs, a repeated slot without
// explicit variants on every row, and variants of one slot whose domains
// are not provably disjoint. Errors are *ManifestError and point at
// manifest.toml:line:col where TOML gives a position.
func Load(dir string, cat *slot.Catalog) (*Bundle, error) {
	if cat == nil {
		return nil, errors.New("load bundle: nil slot catalog")
	}
	root, err := resolveRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("load bundle: %w", err)
	}
	data, err := readBundleFile(root, ManifestName, maxManifestBytes)
	if err != nil {
		return nil, &ManifestError{File: ManifestName, Msg: "cannot read the manifest", Err: err,
			Hint: "a bundle is a directory with manifest.toml at its root"}
	}
	raw, mp, err := decodeManifest(data)
	if err != nil {
		return nil, err
	}
	m, err := mp.check(raw, root, cat)
	if err != nil {
		return nil, err
	}
	return &Bundle{Dir: root, Manifest: *m}, nil
}

// LastDimField is the capability field that the established tool's
// metadata key max_last_dim bounds on a slot: the last dimension of the
// slot's main input as its live binding supplies it — last_dim where the
// binding supplies that, else the head dimension (attention slots: q, k and
// v end in head_dim), else the hidden dimension (MoE and fused collective
// slots, whose inputs end in the hidden size).
func LastDimField(spec *slot.Spec) string {
	for _, f := range []string{"last_dim", "head_dim", "hidden_dim"} {
		if slices.Contains(spec.DescriptorFields, f) {
			return f
		}
	}
	return "last_dim"
}

// readBundleFile reads a regular, non-symlink file of at most limit bytes.
func readBundleFile(root, rel string, limit int64) ([]byte, error) {
	if err := checkNoSymlinks(root, rel); err != nil {
		return nil, err
	}
	f, err := nofollow.Open(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", rel, limit)
	}
	return b, nil
}

// checkNoSymlinks walks rel component by component with Lstat: every
// directory on the way must be a real directory and the last component a
// regular file; a symlink anywhere is refused.
func checkNoSymlinks(root, rel string) error {
	parts := strings.Split(rel, "/")
	cur := root
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		sofar := strings.Join(parts[:i+1], "/")
		info, err := os.Lstat(cur)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("%s does not exist", sofar)
		case err != nil:
			return err
		case info.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink; bundles hold regular files only", sofar)
		case i < len(parts)-1 && !info.IsDir():
			return fmt.Errorf("%s is not a directory", sofar)
		case i == len(parts)-1 && !info.Mode().IsRegular():
			return fmt.Errorf("%s is not a regular file", sofar)
		}
	}
	return nil
}

func isValidUTF8(s string) bool { return utf8.ValidString(s) }

// check validates the decoded manifest and resolves its rows.
func (mp *manifestParser) check(raw *rawManifest, root string, cat *slot.Catalog) (*Manifest, error) {
	m := &Manifest{}
	switch {
	case raw.BundleID == nil:
		return nil, mp.errAt("", `add bundle_id = "my-bundle"`, "missing required key bundle_id")
	case !isName(*raw.BundleID, 128):
		return nil, mp.errAt("bundle_id", "use letters, digits, '.', '_' and '-' (at most 128, starting with a letter or digit)",
			"%q is not a valid bundle id", clipName(*raw.BundleID))
	}
	m.BundleID = *raw.BundleID
	switch {
	case raw.ABIVersion == nil:
		return nil, mp.errAt("", `add abi_version = "`+ABIVersion+`"`, "missing required key abi_version")
	case *raw.ABIVersion != ABIVersion:
		return nil, mp.errAt("abi_version", `author bundles against abi_version = "`+ABIVersion+`"`,
			"unsupported ABI version %q", clipName(*raw.ABIVersion))
	}
	m.ABIVersion = ABIVersion
	if raw.Competition != nil {
		c, err := mp.competition(raw.Competition, cat)
		if err != nil {
			return nil, err
		}
		m.Competition = c
	}
	if t := opsTable(mp.pos); t.Line > 0 {
		return nil, &ManifestError{File: ManifestName, Line: t.Line, Col: t.Col, Path: "ops",
			Msg: "[ops] declares a single table", Hint: "declare each row with [[ops]] (an array of tables)"}
	}
	if len(raw.Ops) == 0 {
		return nil, mp.errAt("", "add at least one [[ops]] row with slot, source and entry", "the manifest has no [[ops]] rows")
	}
	if len(raw.Ops) > maxOps {
		return nil, mp.errAt(fmt.Sprintf("ops[%d]", maxOps), "", "more than %d [[ops]] rows", maxOps)
	}
	explicit := make([]bool, len(raw.Ops))
	for i := range raw.Ops {
		op, err := mp.row(i, &raw.Ops[i], root, cat)
		if err != nil {
			return nil, err
		}
		explicit[i] = raw.Ops[i].Variant != nil
		m.Ops = append(m.Ops, op)
	}
	if err := mp.checkVariants(m.Ops, explicit); err != nil {
		return nil, err
	}
	if c := m.Competition; c != nil && c.Mode == target.ModeSlot {
		found := false
		for _, op := range m.Ops {
			found = found || op.Slot == c.Target
		}
		if !found {
			return nil, mp.errAt("competition.target", "add an [[ops]] row for the target slot, or request the target the rows implement",
				"mode = \"slot\" requests %s, but no [[ops]] row implements that slot", c.Target)
		}
	}
	return m, nil
}

func (mp *manifestParser) competition(rc *rawCompetition, cat *slot.Catalog) (*Competition, error) {
	if rc.Target == nil {
		return nil, mp.errAt("competition", "add target = \"<registered target>\"", "missing required key target")
	}
	if rc.Mode == nil {
		return nil, mp.errAt("competition", `add mode = "slot" (or "atomic" for a registered atomic target)`, "missing required key mode")
	}
	c := &Competition{Target: *rc.Target, Mode: target.Mode(*rc.Mode)}
	if err := checkTargetName(c.Target); err != nil {
		return nil, mp.errAt("competition.target", "", "%v", err)
	}
	switch c.Mode {
	case target.ModeSlot:
		if _, ok := cat.Lookup(c.Target); !ok {
			return nil, mp.errAt("competition.target", "a slot-mode target is one registered slot: "+strings.Join(cat.Names(), ", "),
				"%q is not a registered slot", c.Target)
		}
	case target.ModeAtomic, target.ModeSystem:
	default:
		return nil, mp.errAt("competition.mode", `use "slot" or "atomic"`, "unknown mode %q", clipName(*rc.Mode))
	}
	return c, nil
}

// row checks and resolves ops[i].
func (mp *manifestParser) row(i int, r *rawOp, root string, cat *slot.Catalog) (Op, error) {
	at := func(key string) string {
		if key == "" {
			return fmt.Sprintf("ops[%d]", i)
		}
		return fmt.Sprintf("ops[%d].%s", i, key)
	}
	var op Op
	if r.Slot == nil {
		return op, mp.errAt(at(""), "add slot = \"<slot name>\"", "missing required key slot")
	}
	spec, ok := cat.Lookup(*r.Slot)
	if !ok {
		return op, mp.errAt(at("slot"), "registered slots: "+strings.Join(cat.Names(), ", "),
			"unknown slot %q", clipName(*r.Slot))
	}
	op.Slot = spec.Name
	op.Variant = DefaultVariant
	if r.Variant != nil {
		if !isName(*r.Variant, 64) {
			return op, mp.errAt(at("variant"), "use letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit)",
				"%q is not a valid variant name", clipName(*r.Variant))
		}
		op.Variant = *r.Variant
	}
	if r.Source == nil {
		return op, mp.errAt(at(""), "add source = \"kernels/<file>.py\"", "missing required key source")
	}
	if err := mp.checkFile(at("source"), root, *r.Source, ".py"); err != nil {
		return op, err
	}
	op.Source = *r.Source
	op.Entry = spec.Entry
	if r.Entry != nil {
		if err := checkPythonIdent(*r.Entry); err != nil {
			return op, mp.errAt(at("entry"), "", "%v", err)
		}
		op.Entry = *r.Entry
	}
	switch {
	case r.Prepare != nil && spec.Prepare == "":
		return op, mp.errAt(at("prepare"), "remove prepare", "slot %s has no prepare step", spec.Name)
	case r.Prepare == nil && spec.Prepare != "":
		return op, mp.errAt(at(""), `add prepare = "<function in source>"`, "slot %s requires a prepare function", spec.Name)
	case r.Prepare != nil:
		if err := checkPythonIdent(*r.Prepare); err != nil {
			return op, mp.errAt(at("prepare"), "", "%v", err)
		}
		op.Prepare = *r.Prepare
	}
	narrow := capability.Domain{}
	if r.DTypes != nil {
		vals, d, err := mp.contextList(at("dtypes"), "dtype", *r.DTypes)
		if err != nil {
			return op, err
		}
		op.DTypes, narrow = vals, narrow.Intersect(d)
	}
	if r.Architectures != nil {
		vals, d, err := mp.contextList(at("architectures"), "architecture", *r.Architectures)
		if err != nil {
			return op, err
		}
		op.Architectures, narrow = vals, narrow.Intersect(d)
	}
	meta := capability.Domain{}
	if r.Metadata != nil {
		if err := mp.checkFile(at("metadata"), root, *r.Metadata, ".json"); err != nil {
			return op, err
		}
		op.Metadata = *r.Metadata
		b, err := readBundleFile(root, op.Metadata, capability.MaxMetadataBytes)
		if err != nil {
			return op, mp.wrapAt(at("metadata"), "read "+op.Metadata, err)
		}
		md, err := capability.ReadMetadata(b, capability.ReadOptions{LastDimField: LastDimField(spec)})
		if err != nil {
			return op, mp.wrapAt(at("metadata"), op.Metadata, err)
		}
		if md.SlotKey != "" {
			if named, ok := cat.Lookup(md.Slot); !ok || named.Name != spec.Name {
				return op, mp.errAt(at("metadata"), "make the metadata name the row's slot, or point the row at the metadata of its slot",
					"%s: %s: names slot %q, but this row is for slot %s", op.Metadata, md.SlotKey, clipName(md.Slot), spec.Name)
			}
		}
		meta = md.Domain
		for _, k := range md.Ignored {
			op.Notes = append(op.Notes, capability.IgnoredNote(k))
		}
		if md.LastDimField != "" && md.LastDimField != "last_dim" {
			op.Notes = append(op.Notes, fmt.Sprintf("max_last_dim bounds %s, the last dimension of slot %s's inputs", md.LastDimField, spec.Name))
		}
	}
	if r.CUDASources != nil {
		if len(*r.CUDASources) > maxListLen {
			return op, mp.errAt(at("cuda_sources"), "", "more than %d entries", maxListLen)
		}
		seen := map[string]bool{}
		for j, p := range *r.CUDASources {
			key := fmt.Sprintf("%s[%d]", at("cuda_sources"), j)
			if seen[p] {
				return op, mp.errAt(key, "list each file once", "duplicate entry %q", clipName(p))
			}
			seen[p] = true
			if err := mp.checkFile(key, root, p, ".cu", ".cuh"); err != nil {
				return op, err
			}
		}
		op.CUDASources = append([]string{}, *r.CUDASources...)
	}
	op.Domain = meta.Intersect(narrow)
	if err := mp.checkDomain(i, op, spec, meta, narrow); err != nil {
		return op, err
	}
	return op, nil
}

func (mp *manifestParser) wrapAt(path, msg string, err error) *ManifestError {
	e := mp.errAt(path, "", "%s", msg)
	e.Err = err
	return e
}

// checkFile validates a declared path: safe, the right suffix, covered by
// the content hash, and an existing regular file with no symlink on the way.
func (mp *manifestParser) checkFile(path, root, p string, suffixes ...string) error {
	if err := checkRelPath(p); err != nil {
		return mp.errAt(path, "paths are relative to the bundle root, with / separators", "%q: %v", clipName(p), err)
	}
	ok := false
	for _, s := range suffixes {
		ok = ok || (strings.HasSuffix(p, s) && len(p) > len(s))
	}
	if !ok {
		return mp.errAt(path, "", "%q: want a %s file", clipName(p), strings.Join(suffixes, " or "))
	}
	if Excluded(p) {
		return mp.errAt(path, "move it out of .git/__pycache__ and do not name it ._*",
			"%q is excluded from the content hash, so it would be missing from the package", clipName(p))
	}
	if err := checkNoSymlinks(root, p); err != nil {
		return mp.errAt(path, "", "%v", err)
	}
	return nil
}

// contextList normalises a row's dtypes or architectures list. An empty
// list places no restriction.
func (mp *manifestParser) contextList(path, field string, vals []string) ([]string, capability.Domain, error) {
	if len(vals) == 0 {
		return nil, capability.Domain{}, nil // no restriction, as in the established tool
	}
	if len(vals) > maxListLen {
		return nil, capability.Domain{}, mp.errAt(path, "", "more than %d entries", maxListLen)
	}
	seen := map[string]int{}
	out := make([]string, 0, len(vals))
	for j, v := range vals {
		c, err := capability.NormalizeValue(field, v)
		if err != nil {
			return nil, capability.Domain{}, mp.errAt(fmt.Sprintf("%s[%d]", path, j), "", "%v", err)
		}
		if k, dup := seen[c]; dup {
			return nil, capability.Domain{}, mp.errAt(fmt.Sprintf("%s[%d]", path, j), "list each value once",
				"%q duplicates entry %d (both mean %s)", clipName(v), k, c)
		}
		seen[c] = j
		out = append(out, c)
	}
	sort.Strings(out)
	d, err := capability.OneOf(field, out...)
	if err != nil {
		return nil, capability.Domain{}, mp.errAt(path, "", "%v", err)
	}
	return out, d, nil
}

// checkDomain applies the registration checks that concern one row: the
// domain is not empty, and every predicated field is one the slot's binding
// supplies.
func (mp *manifestParser) checkDomain(i int, op Op, spec *slot.Spec, meta, narrow capability.Domain) error {
	supplied := map[string]bool{}
	for _, f := range spec.DescriptorFields {
		supplied[f] = true
	}
	for _, f := range op.Domain.Fields() {
		if supplied[f] {
			continue
		}
		path := fmt.Sprintf("ops[%d].metadata", i)
		switch {
		case f == "dtype" && op.DTypes != nil && meta.Describe(f) == "any":
			path = fmt.Sprintf("ops[%d].dtypes", i)
		case f == "architecture" && op.Architectures != nil && meta.Describe(f) == "any":
			path = fmt.Sprintf("ops[%d].architectures", i)
		}
		return mp.errAt(path, "remove the predicate: a predicate the binding can never evaluate would make the variant never fire",
			"predicate on capability field %q can never match: slot %s's live binding supplies only %s",
			f, spec.Name, strings.Join(spec.DescriptorFields, ", "))
	}
	if reason := op.Domain.EmptyReason(); reason != "" {
		field, _, _ := strings.Cut(reason, ":")
		return mp.errAt(fmt.Sprintf("ops[%d]", i), "make the metadata and the row's dtypes/architectures agree",
			"capability domain of variant %q is empty: %s (metadata: %s; manifest row: %s)",
			op.Variant, reason, meta.Describe(field), narrow.Describe(field))
	}
	return nil
}

// checkVariants applies the cross-row registration checks.
func (mp *manifestParser) checkVariants(ops []Op, explicit []bool) error {
	bySlot := map[string][]int{}
	for i, op := range ops {
		bySlot[op.Slot] = append(bySlot[op.Slot], i)
	}
	for i, op := range ops {
		rows := bySlot[op.Slot]
		if len(rows) < 2 {
			continue
		}
		for _, j := range rows {
			if j >= i {
				break
			}
			if ops[j].Variant == op.Variant {
				return mp.errAt(fmt.Sprintf("ops[%d].variant", i), "give every row of a slot its own variant name",
					"duplicate variant %q of slot %s (also ops[%d])", op.Variant, op.Slot, j)
			}
		}
		if !explicit[i] {
			return mp.errAt(fmt.Sprintf("ops[%d]", i), `add variant = "<name>" to every row of the slot`,
				"slot %s has %d rows: every row of a repeated slot must name an explicit, unique variant", op.Slot, len(rows))
		}
	}
	for i, op := range ops {
		for _, j := range bySlot[op.Slot] {
			if j >= i {
				break
			}
			if capability.Overlaps(ops[j].Domain, op.Domain) {
				return mp.errAt(fmt.Sprintf("ops[%d]", i), "make the variants' capability domains provably disjoint on some field (for example different head_dim values or non-overlapping num_tokens ranges)",
					"variant %q of slot %s overlaps variant %q (ops[%d]): domains {%s} and {%s} can both match one call",
					op.Variant, op.Slot, ops[j].Variant, j, op.Domain, ops[j].Domain)
			}
		}
	}
	return nil
}

// Rows returns the rows implementing slot, in manifest order.
func (b *Bundle) Rows(slotName string) []Op {
	var out []Op
	for _, op := range b.Manifest.Ops {
		if op.Slot == slotName {
			out = append(out, op)
		}
	}
	return out
}

// SelectedPaths lists the bundle files a target made of the given member
// slots needs: every matching row's source, metadata and cuda_sources, plus
// extra (for example the bundle-local Python modules those sources import,
// as found by the static scan). The result is sorted bytewise and
// duplicate-free; pass it to SelectedPayloadDigest. Every member slot must
// have at least one row.
func (b *Bundle) SelectedPaths(slots []string, extra []string) ([]string, error) {
	if len(slots) == 0 {
		return nil, errors.New("selected paths: no target member slots")
	}
	set := map[string]bool{}
	for _, s := range slots {
		rows := b.Rows(s)
		if len(rows) == 0 {
			return nil, fmt.Errorf("selected paths: the bundle has no [[ops]] row for slot %s", s)
		}
		for _, op := range rows {
			set[op.Source] = true
			if op.Metadata != "" {
				set[op.Metadata] = true
			}
			for _, c := range op.CUDASources {
				set[c] = true
			}
		}
	}
	for _, p := range extra {
		if err := checkRelPath(p); err != nil {
			return nil, fmt.Errorf("selected paths: extra file %q: %w", clipName(p), err)
		}
		if Excluded(p) {
			return nil, fmt.Errorf("selected paths: extra file %q is not covered by the content hash", clipName(p))
		}
		set[p] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}
