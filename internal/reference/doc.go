// Package reference holds the validator's trusted reference implementations of
// the eleven Cacheon slots (DESIGN.md §5).
//
// Everything here is pure Go on plain row-major []float64 slices: the caller
// widens every floating tensor to float64 (integer tensors arrive as []int32),
// every accumulation is float64 and every output is float64. The package
// depends on nothing but the standard library and on no other cacheon package.
//
// # Validation
//
// Every exported function checks each argument's length against the declared
// dimensions (with overflow-checked products), every index tensor against its
// range, and every scalar against its contract before it touches the data. A
// violation returns an *ArgError naming the function and the argument; no
// input makes a function panic.
//
// # Determinism
//
// Work is split over the outermost independent dimension (rows, tokens,
// query heads, batch×kv-heads, expert row blocks) across
// runtime.GOMAXPROCS(0) goroutines. Every output element is computed by
// exactly one goroutine with a fixed summation order that does not depend on
// the split, so results are bit-identical for any worker count.
//
// The fixed order of every dot product (see dot) is: products of even index
// are summed into one partial sum and products of odd index into a second,
// both in increasing index order, and the result is even+odd. Every product
// is rounded to float64 before it is added (an explicit conversion forbids
// fused multiply-add), so the order holds on every GOARCH and GOAMD64 level.
// Other reductions (softmax denominators, cross-head, cross-expert and
// cross-rank sums) run sequentially in increasing index order. Elementary
// functions come from package math (math.Exp may differ by an ulp between
// architectures; math.Sqrt is exact).
package reference
