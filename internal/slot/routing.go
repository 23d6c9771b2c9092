package slot

import (
	"math"
	"sort"
)

// Routing patterns (v18, session 38). A trained MoE's routing has
// structure that verify's uniform draws never had, and two rt37 bundles
// keyed on it: DeepSeek-V3's group-limited routing (the experts fall in
// 8 groups and each token's top-k lies in at most 4 of them:
// moe_group_limited_top1 ran only each token's top expert then) and a
// shared expert fused into the routed call (the last top-k column names
// one expert at one weight in every row: moe_shared_expert_drop dropped
// it).
//
// In a quarter of the calls that are neither the serving case's nor
// skewed (topk_ids), decided by the first uniform u of the stream of
// argument "route" at the call's replay, rank 0:
//   - u < 1/4, grouped: when the expert count E splits into G = 8 groups
//     of two or more (E % 8 == 0, E ≥ 16), else into 4 (E % 4 == 0,
//     E ≥ 8), each row keeps its K experts inside `per` of the G groups,
//     per = intn over [⌈K/(E/G)⌉, G/2] from the same stream (one per
//     call); a row draws its groups (perm of G) and then its experts
//     (perm of the chosen groups' experts) from the argument's stream;
//   - 1/4 ≤ u < 1/2, shared: when K ≥ 2 and E > K, the last column of
//     every row is one expert (intn(E) from the stream) at one weight
//     (log-uniform over [0.1, 1], from the stream), the other K−1
//     distinct routed experts; sorted rows sort the routed weights only.
//
// Both are legal inputs of the contract: distinct ids per row, positive
// weights.
type routing struct {
	kind        routeKind
	groups, per int
	shared      int
	weight      float64
}

type routeKind int

const (
	routeFree routeKind = iota
	routeGrouped
	routeShared
)

// routing is the call's routing pattern for E experts and top-k K.
func (c *Case) routing(experts, k int) routing {
	if c.Serving || experts < 2 || k < 1 || (c.Index+c.Replay)%3 == 2 {
		return routing{}
	}
	g := newStream(c.Seed, c.Spec.Name, c.Shape, c.Index, c.Replay, 0, "route")
	u := g.uniform()
	switch {
	case u < 0.25:
		groups := 0
		switch {
		case experts%8 == 0 && experts >= 16:
			groups = 8
		case experts%4 == 0 && experts >= 8:
			groups = 4
		}
		if groups == 0 {
			return routing{}
		}
		lo := (k + experts/groups - 1) / (experts / groups)
		if lo > groups/2 {
			return routing{}
		}
		return routing{kind: routeGrouped, groups: groups, per: lo + g.intn(groups/2-lo+1)}
	case u < 0.5:
		if k < 2 || experts <= k {
			return routing{}
		}
		id := g.intn(experts)
		w := math.Exp(math.Log(0.1) * (1 - g.uniform()))
		return routing{kind: routeShared, shared: id, weight: w}
	}
	return routing{}
}

// ids fills one row of top-k ids from g under the pattern, over experts
// ids; false (nothing drawn) for free routing.
func (rt routing) ids(g *rng, experts int, row []int64) bool {
	switch rt.kind {
	case routeGrouped:
		size := experts / rt.groups
		chosen := g.perm(rt.groups)[:rt.per]
		pool := make([]int, 0, rt.per*size)
		for _, grp := range chosen {
			for e := range size {
				pool = append(pool, grp*size+e)
			}
		}
		p := g.perm(len(pool))
		for j := range row {
			row[j] = int64(pool[p[j]])
		}
		return true
	case routeShared:
		p := g.perm(experts - 1)
		for j := range row[:len(row)-1] {
			e := p[j]
			if e >= rt.shared {
				e++ // skip the shared expert
			}
			row[j] = int64(e)
		}
		row[len(row)-1] = int64(rt.shared)
		return true
	}
	return false
}

// weights puts the shared expert's weight in a row's last column (the
// routed columns sorted descending first when sorted); a no-op for the
// other patterns.
func (rt routing) weights(w []float64, sorted bool) {
	if rt.kind != routeShared || len(w) < 2 {
		return
	}
	if sorted {
		sort.Sort(sort.Reverse(sort.Float64Slice(w[:len(w)-1])))
	}
	w[len(w)-1] = rt.weight
}
