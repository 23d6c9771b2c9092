package slot

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Dims are the named integer dimensions of one verification case.
type Dims map[string]int

// EvalDim evaluates a dimension expression against d. Grammar:
//
//	expr   = term { "+" term }
//	term   = factor { ("*" | "/") factor }     "/" must divide exactly
//	factor = integer | NAME | "(" expr ")" | "cdiv(" expr "," expr ")"
func EvalDim(expr string, d Dims) (int, error) {
	p := &dimParser{s: strings.ReplaceAll(expr, " ", ""), d: d}
	v, err := p.expr()
	if err == nil && p.i != len(p.s) {
		err = fmt.Errorf("unexpected %q at %d", p.s[p.i:], p.i)
	}
	if err != nil {
		return 0, fmt.Errorf("dimension %q: %w", expr, err)
	}
	return v, nil
}

type dimParser struct {
	s string
	i int
	d Dims
}

func (p *dimParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *dimParser) expr() (int, error) {
	v, err := p.term()
	for err == nil && p.peek() == '+' {
		p.i++
		var w int
		w, err = p.term()
		v += w
	}
	return v, err
}

func (p *dimParser) term() (int, error) {
	v, err := p.factor()
	for err == nil && (p.peek() == '*' || p.peek() == '/') {
		op := p.peek()
		p.i++
		var w int
		if w, err = p.factor(); err != nil {
			break
		}
		if op == '*' {
			v *= w
		} else {
			if w <= 0 || v%w != 0 {
				return 0, fmt.Errorf("%d/%d is not an exact division", v, w)
			}
			v /= w
		}
	}
	return v, err
}

func (p *dimParser) factor() (int, error) {
	switch c := p.peek(); {
	case c == '(':
		p.i++
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, fmt.Errorf("missing ')' at %d", p.i)
		}
		p.i++
		return v, nil
	case c >= '0' && c <= '9':
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		return strconv.Atoi(p.s[j:p.i])
	case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		j := p.i
		for p.i < len(p.s) && (p.s[p.i] == '_' || p.s[p.i] >= 'A' && p.s[p.i] <= 'Z' || p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] >= '0' && p.s[p.i] <= '9') {
			p.i++
		}
		name := p.s[j:p.i]
		if name == "cdiv" && p.peek() == '(' {
			p.i++
			a, err := p.expr()
			if err != nil {
				return 0, err
			}
			if p.peek() != ',' {
				return 0, fmt.Errorf("cdiv needs two arguments")
			}
			p.i++
			b, err := p.expr()
			if err != nil {
				return 0, err
			}
			if p.peek() != ')' {
				return 0, fmt.Errorf("missing ')' after cdiv")
			}
			p.i++
			if b <= 0 {
				return 0, fmt.Errorf("cdiv by %d", b)
			}
			return (a + b - 1) / b, nil
		}
		v, ok := p.d[name]
		if !ok {
			return 0, fmt.Errorf("unknown dimension %q", name)
		}
		return v, nil
	}
	return 0, fmt.Errorf("unexpected %q at %d", p.s[p.i:], p.i)
}

// EvalScalar evaluates a scalar argument expression: a decimal literal, a
// dimension name, or rsqrt(NAME), optionally multiplied by a decimal
// literal (0.5*rsqrt(D)).
func EvalScalar(expr string, d Dims) (float64, error) {
	if k, rest, ok := strings.Cut(expr, "*"); ok {
		f, err := strconv.ParseFloat(k, 64)
		if err != nil {
			return 0, fmt.Errorf("scalar %q: factor %q is not a decimal", expr, k)
		}
		v, err := EvalScalar(rest, d)
		if err != nil {
			return 0, err
		}
		return f * v, nil
	}
	if strings.HasPrefix(expr, "rsqrt(") && strings.HasSuffix(expr, ")") {
		v, err := EvalDim(expr[len("rsqrt("):len(expr)-1], d)
		if err != nil {
			return 0, fmt.Errorf("scalar %q: %w", expr, err)
		}
		if v <= 0 {
			return 0, fmt.Errorf("scalar %q: rsqrt of %d", expr, v)
		}
		return 1 / math.Sqrt(float64(v)), nil
	}
	if f, err := strconv.ParseFloat(expr, 64); err == nil {
		return f, nil
	}
	v, err := EvalDim(expr, d)
	if err != nil {
		return 0, fmt.Errorf("scalar %q: %w", expr, err)
	}
	return float64(v), nil
}
