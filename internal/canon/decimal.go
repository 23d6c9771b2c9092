package canon

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Decimal is a canonical decimal string such as "0.00001", "2", "-1.5".
// Canonical means: optional leading '-', no '+', no exponent, no leading
// zeros in the integer part (except a single "0"), no trailing zeros in the
// fraction and no trailing '.', and never "-0".
type Decimal string

// ParseDecimal accepts any exact decimal notation (including exponents, e.g.
// "1e-5") and returns its canonical form. Values that are not exactly
// representable as a terminating decimal are impossible here because the
// input is itself decimal.
//
// Inputs are bounded, since the work grows with the exponent and the
// length: at most MaxDecimalLen bytes, and with an exponent at most
// MaxDecimalExponent bytes and an exponent within ±MaxDecimalExponent (so
// every canonical form fits MaxDecimalLen again).
func ParseDecimal(s string) (Decimal, error) {
	if !decimalSyntax(s) {
		return "", fmt.Errorf("decimal %q: not a decimal number", clip(s))
	}
	if len(s) > MaxDecimalLen {
		return "", fmt.Errorf("decimal %q: longer than %d bytes", clip(s), MaxDecimalLen)
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil {
			return "", fmt.Errorf("decimal %q: not a decimal number", clip(s))
		}
		if e > MaxDecimalExponent || e < -MaxDecimalExponent {
			return "", fmt.Errorf("decimal %q: exponent %d is outside ±%d", clip(s), e, MaxDecimalExponent)
		}
		if len(s) > MaxDecimalExponent {
			return "", fmt.Errorf("decimal %q: longer than %d bytes with an exponent", clip(s), MaxDecimalExponent)
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", fmt.Errorf("decimal %q: not a decimal number", clip(s))
	}
	return formatRat(r), nil
}

// decimalSyntax reports whether s is [+-]digits[.digits][(e|E)[+-]digits],
// where either side of the point may be empty but not both. big.Rat alone
// would also take fractions ("1/3"), hex and binary exponents ("0x1p10",
// "1p10000"), and underscores, none of which is a decimal literal.
func decimalSyntax(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	n := digits()
	if i < len(s) && s[i] == '.' {
		i++
		n += digits()
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// Bounds on ParseDecimal's input.
const (
	MaxDecimalLen      = 1024
	MaxDecimalExponent = 400
)

// MustDecimal is ParseDecimal for compile-time constants; it panics on a bad
// literal, so use it only with literals written in the source.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

// CheckCanonical verifies that s is already in canonical form.
func (d Decimal) CheckCanonical() error {
	c, err := ParseDecimal(string(d))
	if err != nil {
		return err
	}
	if c != d {
		return fmt.Errorf("decimal %q is not canonical (want %q)", string(d), string(c))
	}
	return nil
}

// Float64 returns the nearest float64.
func (d Decimal) Float64() (float64, error) {
	r, ok := new(big.Rat).SetString(string(d))
	if !ok {
		return 0, fmt.Errorf("decimal %q: not a decimal number", string(d))
	}
	f, _ := r.Float64()
	return f, nil
}

func formatRat(r *big.Rat) Decimal {
	if r.Sign() == 0 {
		return "0"
	}
	// A rational from a decimal literal has a denominator 2^a*5^b; the
	// number of fraction digits needed is max(a, b).
	den := new(big.Int).Set(r.Denom())
	digits := 0
	two, five, zero := big.NewInt(2), big.NewInt(5), big.NewInt(0)
	a, b := 0, 0
	m := new(big.Int)
	for m.Mod(den, two).Cmp(zero) == 0 {
		den.Quo(den, two)
		a++
	}
	for m.Mod(den, five).Cmp(zero) == 0 {
		den.Quo(den, five)
		b++
	}
	digits = max(a, b)
	s := r.FloatString(digits)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return Decimal(s)
}
