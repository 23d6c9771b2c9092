package bundle

import (
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// position is a 1-based line and column in manifest.toml.
type position struct{ line, col int }

// positions maps manifest value paths ("bundle_id", "competition.mode",
// "ops[1].dtypes[0]") to where they appear in the document, so that errors
// found after decoding still point at file:line:col. Table headers are
// recorded under the table's own path ("ops[1]", "competition").
type positions struct {
	at map[string]position
	// opsHeaders holds the line of each [[ops]] header, in order.
	opsHeaders []int
	// opsTable is where a [ops] table header (instead of [[ops]]) appears.
	opsTable position
}

// indexPositions walks the TOML document with the low-level parser. It is
// only called on documents the decoder accepted, and tolerates anything.
func indexPositions(data []byte) positions {
	ps := positions{at: map[string]position{}}
	var p unstable.Parser
	p.Reset(data)
	prefix := ""
	counts := map[string]int{}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			prefix = keyPath(e.Key())
			pos := ps.record(&p, prefix, e.Key())
			if prefix == "ops" && ps.opsTable.line == 0 {
				ps.opsTable = pos
			}
		case unstable.ArrayTable:
			k := keyPath(e.Key())
			prefix = fmt.Sprintf("%s[%d]", k, counts[k])
			counts[k]++
			pos := ps.record(&p, prefix, e.Key())
			if k == "ops" {
				ps.opsHeaders = append(ps.opsHeaders, pos.line)
			}
		case unstable.KeyValue:
			path := joinKey(prefix, keyPath(e.Key()))
			ps.value(&p, path, e.Value(), e)
		}
	}
	return ps
}

// record stores the position of the first key node of it under path.
func (ps *positions) record(p *unstable.Parser, path string, it unstable.Iterator) position {
	if it.Next() {
		n := it.Node()
		pos := shapeOf(p, n)
		if _, dup := ps.at[path]; !dup {
			ps.at[path] = pos
		}
		return pos
	}
	return position{}
}

// value records a value node (falling back to its key-value node when the
// value carries no range) and descends into arrays and inline tables.
func (ps *positions) value(p *unstable.Parser, path string, v, kv *unstable.Node) {
	pos := shapeOf(p, v)
	if v.Raw.Length == 0 {
		pos = shapeOf(p, kv)
	}
	if _, dup := ps.at[path]; !dup {
		ps.at[path] = pos
	}
	switch v.Kind {
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			ps.value(p, fmt.Sprintf("%s[%d]", path, i), it.Node(), kv)
		}
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.KeyValue {
				ps.value(p, joinKey(path, keyPath(c.Key())), c.Value(), c)
			}
		}
	}
}

func shapeOf(p *unstable.Parser, n *unstable.Node) position {
	if n == nil || int(n.Raw.Offset)+int(n.Raw.Length) > len(p.Data()) {
		return position{}
	}
	s := p.Shape(n.Raw)
	return position{line: s.Start.Line, col: s.Start.Column}
}

func keyPath(it unstable.Iterator) string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return strings.Join(parts, ".")
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// lookup returns the position of path, or of its closest recorded parent
// ("ops[1].source" falls back to the "ops[1]" header).
func (ps positions) lookup(path string) (position, bool) {
	for path != "" {
		if pos, ok := ps.at[path]; ok && pos.line > 0 {
			return pos, true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return position{}, false
}

// opsIndex returns the index of the [[ops]] row whose header is the last
// one at or before line, or -1.
func (ps positions) opsIndex(line int) int {
	idx := -1
	for i, l := range ps.opsHeaders {
		if l <= line {
			idx = i
		}
	}
	return idx
}
