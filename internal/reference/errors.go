package reference

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ArgError reports an argument that violates a reference function's contract:
// a length that does not match the declared dimensions, a non-positive
// dimension, an index out of range or an invalid scalar.
type ArgError struct {
	// Func is the exported function that rejected the call, e.g. "SDPA".
	Func string
	// Arg names the offending argument or dimension, e.g. "q" or "dm.Hkv".
	Arg string
	// Msg says what is wrong with it.
	Msg string
}

// Error implements error.
func (e *ArgError) Error() string {
	return "reference: " + e.Func + ": " + e.Arg + ": " + e.Msg
}

// argErr builds an *ArgError with a formatted message.
func argErr(fn, arg, format string, a ...any) error {
	return &ArgError{Func: fn, Arg: arg, Msg: fmt.Sprintf(format, a...)}
}

// dim names one integer dimension for positivity checks.
type dim struct {
	name string
	v    int
}

// checkPositive returns an error for the first dimension that is not >= 1.
func checkPositive(fn string, dims ...dim) error {
	for _, d := range dims {
		if d.v < 1 {
			return argErr(fn, d.name, "must be >= 1, got %d", d.v)
		}
	}
	return nil
}

// shapeLen returns the product of dims or an error naming arg when the
// product overflows int. Dimensions are assumed to be already checked >= 0.
func shapeLen(fn, arg string, dims ...int) (int, error) {
	n := 1
	for _, d := range dims {
		if d != 0 && n > math.MaxInt/d {
			return 0, argErr(fn, arg, "shape %s overflows int", shapeString(dims))
		}
		n *= d
	}
	return n, nil
}

// checkLen verifies that an argument of length got has the shape dims.
func checkLen(fn, arg string, got int, dims ...int) error {
	want, err := shapeLen(fn, arg, dims...)
	if err != nil {
		return err
	}
	if got != want {
		return argErr(fn, arg, "has length %d, want %d for shape %s", got, want, shapeString(dims))
	}
	return nil
}

// checkFinite rejects NaN and ±Inf scalars.
func checkFinite(fn, arg string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return argErr(fn, arg, "must be finite, got %v", v)
	}
	return nil
}

// checkEps requires a finite, non-negative epsilon.
func checkEps(fn string, eps float64) error {
	if math.IsNaN(eps) || math.IsInf(eps, 0) || eps < 0 {
		return argErr(fn, "eps", "must be finite and >= 0, got %v", eps)
	}
	return nil
}

// shapeString renders dims as "(a,b,c)".
func shapeString(dims []int) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.Itoa(d)
	}
	return "(" + strings.Join(parts, ",") + ")"
}

// ceilDiv returns ceil(a/b) for a >= 0, b >= 1.
func ceilDiv(a, b int) int {
	return a/b + min(a%b, 1)
}
