package arena

import (
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// pos is a 1-based line and column in the arena file.
type pos struct{ line, col int }

// keyIndex maps every key path of a TOML document ("model.num_heads",
// "workloads.b64", "workload.prompt_len") to where its key is written, so
// that errors found after decoding still point at file:line:col. Table
// headers are recorded under the table's path.
type keyIndex map[string]pos

// indexKeys walks data with the low-level parser. It is only called on
// documents the decoder accepted and tolerates anything.
func indexKeys(data []byte) keyIndex {
	ix := keyIndex{}
	var p unstable.Parser
	p.Reset(data)
	prefix := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			prefix = ix.key(&p, "", e.Key())
		case unstable.KeyValue:
			ix.keyValue(&p, prefix, e)
		}
	}
	return ix
}

// key records every prefix of a (dotted) key under prefix and returns the
// full path.
func (ix keyIndex) key(p *unstable.Parser, prefix string, it unstable.Iterator) string {
	path := prefix
	for it.Next() {
		n := it.Node()
		if path == "" {
			path = string(n.Data)
		} else {
			path += "." + string(n.Data)
		}
		if _, dup := ix[path]; !dup {
			ix[path] = shapeOf(p, n)
		}
	}
	return path
}

func (ix keyIndex) keyValue(p *unstable.Parser, prefix string, kv *unstable.Node) {
	path := ix.key(p, prefix, kv.Key())
	if v := kv.Value(); v != nil && v.Kind == unstable.InlineTable {
		it := v.Children()
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				ix.keyValue(p, path, c)
			}
		}
	}
}

func shapeOf(p *unstable.Parser, n *unstable.Node) pos {
	if n == nil || n.Raw.Length == 0 || int(n.Raw.Offset)+int(n.Raw.Length) > len(p.Data()) {
		return pos{}
	}
	s := p.Shape(n.Raw)
	return pos{line: s.Start.Line, col: s.Start.Column}
}

// has reports whether path is written in the document.
func (ix keyIndex) has(path string) bool {
	_, ok := ix[path]
	return ok
}

// at returns where path (or its closest written parent) is.
func (ix keyIndex) at(path string) pos {
	for path != "" {
		if p, ok := ix[path]; ok && p.line > 0 {
			return p
		}
		i := strings.LastIndexByte(path, '.')
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return pos{}
}
