package slot

import (
	"fmt"
	"maps"
	"slices"
)

// Process groups (v19, session 39). A collective entry takes the process
// group it reduces over, and serving's tensor-parallel group is the world
// today, but a deployment with data or pipeline parallelism hands each
// kernel a strict subgroup. Verify handed every collective call the world
// group, and an all-reduce that reduced over the default (world) group
// instead of the one it was handed (allreduce_default_group, rt37 class B)
// passed. Now verify's ranks also join the subgroups of a partition drawn
// from the run's seed (Partition), and a third of each collective row's
// cases hand the kernel its rank's subgroup (Spec.SubgroupCase), graded
// against the reduction over that subgroup's ranks only
// (Case.ReferenceOver).

// Partition is the partition of ws ranks into the subgroups verify's
// ranks create (v19, rule 19 of rng.go): nil below two ranks; else k
// parts, k = 2 + intn(max(1, ⌊ws/2⌋ − 1)) (two up to 5 ranks, up to four
// at 8), drawn from the stream of argument "process_group.partition:" +
// the decimal ws, with shape "" and case, replay and rank 0, keyed by the
// run's seed: a permutation p of the ranks (perm), rank p[i] in part i for
// i < k, every later rank p[i] in part intn(k). Membership is random, so
// a part is contiguous at some seeds and interleaved at others, and from 3
// ranks on some part holds two ranks or more. The parts are returned in
// the order of their smallest rank, each ascending: the order in which
// every rank creates them.
//
// The seed is the run's, not a row's: the subgroups are made before any
// candidate load (the runtime's audit hook refuses sockets after it), by
// the ranks of one worker set, which serve the rows of every dtype at
// their world size in turn.
func Partition(seed uint64, ws int) [][]int {
	if ws < 2 {
		return nil
	}
	g := newStream(seed, "", "", 0, 0, 0, "process_group.partition:"+uitoa(uint64(ws)))
	k := 2 + g.intn(max(1, ws/2-1))
	part := make([]int, ws)
	for i, r := range g.perm(ws) {
		if i < k {
			part[r] = i
		} else {
			part[r] = g.intn(k)
		}
	}
	groups := make([][]int, k)
	for r, p := range part {
		groups[p] = append(groups[p], r)
	}
	slices.SortFunc(groups, func(a, b []int) int { return a[0] - b[0] })
	return groups
}

// CheckPartition reports whether groups partition the ranks 0..ws−1 into
// two or more non-empty parts.
func CheckPartition(groups [][]int, ws int) error {
	if len(groups) < 2 {
		return fmt.Errorf("%d subgroups: a partition has two or more", len(groups))
	}
	seen := make([]bool, ws)
	n := 0
	for i, g := range groups {
		if len(g) == 0 {
			return fmt.Errorf("subgroup %d is empty", i)
		}
		for _, r := range g {
			if r < 0 || r >= ws {
				return fmt.Errorf("subgroup %d: rank %d is outside 0..%d", i, r, ws-1)
			}
			if seen[r] {
				return fmt.Errorf("subgroup %d: rank %d is in two subgroups", i, r)
			}
			seen[r] = true
			n++
		}
	}
	if n != ws {
		return fmt.Errorf("the subgroups hold %d of the %d ranks", n, ws)
	}
	return nil
}

// subgroupEvery: one case in this many of a collective row, after its
// serving case, hands the kernel its subgroup.
const subgroupEvery = 3

// SubgroupCase reports whether the case at position i of a collective
// row (0: the serving case, which hands the world group as serving does)
// hands the kernel its rank's subgroup instead of the world: one case in
// three, those with (i + o) mod 3 = 0 for i ≥ 1, o = intn(3) of the
// stream of argument "process_group.cases" with shape "" and case,
// replay and rank 0, keyed by the row's seed. Dealt, not drawn per case,
// so that every row of four cases or more hands a subgroup at least once
// and the world group in two cases of three (an honest kernel's path for
// the world group stays graded).
func (s *Spec) SubgroupCase(seed uint64, i int) bool {
	if s.Kind != Collective || i < 1 {
		return false
	}
	o := newStream(seed, s.Name, "", 0, 0, 0, "process_group.cases").intn(subgroupEvery)
	return (i+o)%subgroupEvery == 0
}

// ReferenceOver is the case's reference (Reference) for a kernel handed
// the subgroup of the given ranks: the reduction runs over their inputs
// only, the rest of the case as it is (the MoE reduce slot's weight
// shards stay the world's, I/WS each, and the expected output is the sum
// of the group's own partials, what a rank holding its shard computes).
// Sensitivity scales are the group's too. Only collective slots take it.
func (c *Case) ReferenceOver(ranks []int) (map[string][]float64, error) {
	if c.Spec.Kind != Collective {
		return nil, fmt.Errorf("slot %s: reference over ranks %v: not a collective", c.Spec.Name, ranks)
	}
	if len(ranks) == 0 {
		return nil, fmt.Errorf("slot %s: reference over no rank", c.Spec.Name)
	}
	seen := map[int]bool{}
	for _, r := range ranks {
		if r < 0 || r >= len(c.Ranks) || seen[r] {
			return nil, fmt.Errorf("slot %s: reference over ranks %v: rank %d is not one of %d distinct ranks", c.Spec.Name, ranks, r, len(c.Ranks))
		}
		seen[r] = true
	}
	sub := *c
	sub.over = slices.Clone(ranks)
	sub.Scalars = maps.Clone(c.Scalars)
	return sub.Reference()
}

// reduceRanks are the ranks a collective reference reduces over: the
// subgroup's (ReferenceOver), else every rank.
func (c *Case) reduceRanks() []int {
	if c.over != nil {
		return c.over
	}
	all := make([]int, len(c.Ranks))
	for r := range all {
		all[r] = r
	}
	return all
}
