// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package fabric

import (
	"sort"
)

// Overlay is the free capacity of one scheduling cycle laid over a tree:
// how many more pods of one gang each node can take ("slots"), summed per
// domain in O(1) through prefix sums over the tree's node order.
type Overlay struct {
	tree   *Tree
	slots  []int
	prefix []int
}

// Overlay lays per-node slots (indexed like the tree's nodes; negative
// counts as 0) over the tree.
func (t *Tree) Overlay(slots []int) *Overlay {
	o := &Overlay{tree: t, slots: slots, prefix: make([]int, len(t.order)+1)}
	for pos, i := range t.order {
		s := 0
		if i < len(slots) && slots[i] > 0 {
			s = slots[i]
		}
		o.prefix[pos+1] = o.prefix[pos] + s
	}
	return o
}

// Tree returns the tree under the overlay.
func (o *Overlay) Tree() *Tree { return o.tree }

// Free is the number of slots in d.
func (o *Overlay) Free(d *Domain) int { return o.prefix[d.last] - o.prefix[d.first] }

// Request is a gang to place.
type Request struct {
	// Pods is the number of pods still to place.
	Pods int
	// MaxLevel is the highest level the gang may span: a switch level
	// index, or Tree.RootLevel() for no limit.
	MaxLevel int
	// Pinned are the nodes where members of the gang already run; the
	// chosen domain contains all of them.
	Pinned []int
	// Excluded domains are not chosen (e.g. domains where this gang just
	// failed for reasons the capacity overlay does not show).
	Excluded map[*Domain]bool
}

// Placement is where a gang goes.
type Placement struct {
	// Domain holds the whole gang; its level is the gang's fabric level.
	Domain *Domain
	// Parts are the children of Domain that receive pods (nil when Domain
	// is a node).
	Parts []*Domain
	// Nodes maps node index to the number of the gang's pods it receives.
	Nodes map[int]int
	// Leftover is the number of free slots Domain keeps after the gang.
	Leftover int
}

// NodeIndices returns the placement's nodes in tree order.
func (p *Placement) NodeIndices(t *Tree) []int {
	out := make([]int, 0, len(p.Nodes))
	for i := range p.Nodes {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return t.nodes[out[a]].first < t.nodes[out[b]].first })
	return out
}

// Place returns the best placement for req: the lowest level at or below
// req.MaxLevel with a domain that holds all req.Pods, and at that level the
// domain that leaves the fewest free slots (best fit, so larger free domains
// stay whole for larger gangs), then needs the fewest sub-domains, then
// comes first by name. Inside it, pods go to the fewest sub-domains and
// nodes, choosing the fullest ones that still allow that. It returns false
// when no domain at or below req.MaxLevel can hold the gang.
func (o *Overlay) Place(req Request) (Placement, bool) {
	for level := o.tree.CommonLevel(req.Pinned); level <= req.MaxLevel && level <= o.tree.RootLevel(); level++ {
		if best := o.bestAtLevel(req, level, 1); len(best) > 0 {
			return best[0], true
		}
	}
	return Placement{}, false
}

// Candidates returns, for every level from the lowest that holds the gang up
// to req.MaxLevel, up to perLevel placements at that level, best first.
func (o *Overlay) Candidates(req Request, perLevel int) []Placement {
	return o.candidates(req, perLevel, false)
}

// LowestCandidates is Candidates of the lowest level that has any: what a
// gang's first placement attempt offers.
func (o *Overlay) LowestCandidates(req Request, perLevel int) []Placement {
	return o.candidates(req, perLevel, true)
}

func (o *Overlay) candidates(req Request, perLevel int, lowestOnly bool) []Placement {
	var out []Placement
	for level := o.tree.CommonLevel(req.Pinned); level <= req.MaxLevel && level <= o.tree.RootLevel(); level++ {
		out = append(out, o.bestAtLevel(req, level, perLevel)...)
		if lowestOnly && len(out) > 0 {
			break
		}
	}
	return out
}

// CommonLevel is the lowest level whose domains can contain every given
// node: the level of their lowest common ancestor (NodeLevel for none).
func (t *Tree) CommonLevel(nodes []int) int {
	if len(nodes) == 0 {
		return NodeLevel
	}
	for level := NodeLevel; level < t.RootLevel(); level++ {
		d := t.Ancestor(nodes[0], level)
		same := true
		for _, i := range nodes[1:] {
			if t.Ancestor(i, level) != d {
				same = false
				break
			}
		}
		if same {
			return level
		}
	}
	return t.RootLevel()
}

type candidate struct {
	domain   *Domain
	parts    int
	leftover int
}

func (o *Overlay) bestAtLevel(req Request, level, limit int) []Placement {
	var domains []*Domain
	if len(req.Pinned) > 0 {
		domains = []*Domain{o.tree.Ancestor(req.Pinned[0], level)}
	} else {
		domains = o.tree.Domains(level)
	}
	// Keep the `limit` best in one pass; the fewest-parts tie-breaker (a
	// sort of the children) is computed only for domains whose leftover
	// could still make the cut.
	best := make([]candidate, 0, limit+1)
	for _, d := range domains {
		free := o.Free(d)
		if free < req.Pods || req.Excluded[d] {
			continue
		}
		c := candidate{domain: d, leftover: free - req.Pods}
		if len(best) == limit && c.leftover > best[limit-1].leftover {
			continue
		}
		c.parts = o.minParts(d, req.Pods)
		i := sort.Search(len(best), func(i int) bool { return c.less(best[i]) })
		if i >= limit {
			continue
		}
		best = append(best, candidate{})
		copy(best[i+1:], best[i:])
		best[i] = c
		if len(best) > limit {
			best = best[:limit]
		}
	}
	out := make([]Placement, 0, len(best))
	for _, c := range best {
		p := Placement{Domain: c.domain, Nodes: map[int]int{}, Leftover: c.leftover}
		p.Parts = o.fill(c.domain, req.Pods, p.Nodes)
		out = append(out, p)
	}
	return out
}

// less orders candidates: least leftover (best fit), then fewest parts,
// then name.
func (c candidate) less(o candidate) bool {
	if c.leftover != o.leftover {
		return c.leftover < o.leftover
	}
	if c.parts != o.parts {
		return c.parts < o.parts
	}
	return c.domain.Name < o.domain.Name
}

// minParts is the fewest children of d that together hold pods.
func (o *Overlay) minParts(d *Domain, pods int) int {
	if d.IsNode() {
		return 0
	}
	free := make([]int, 0, len(d.Children))
	for _, c := range d.Children {
		if f := o.Free(c); f > 0 {
			free = append(free, f)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(free)))
	sum := 0
	for k, f := range free {
		sum += f
		if sum >= pods {
			return k + 1
		}
	}
	return len(free) + 1
}

// fill assigns pods to nodes below d (which holds at least pods slots) and
// returns the children of d that received pods.
//
// With k the fewest children that hold the pods, it picks k children one by
// one, each time the smallest child that still lets the remaining picks
// finish (its slots plus those of the largest remaining children cover what
// is left), and takes as much as possible from it. Example: 10 pods, leaves
// with 8, 8, 4 and 3 free: k = 2; first pick 3 (3+8 >= 10), then 8 for the
// remaining 7; one slot stays free and the other leaf of 8 stays whole.
func (o *Overlay) fill(d *Domain, pods int, out map[int]int) []*Domain {
	if d.IsNode() {
		out[o.tree.nodeIndex[d.Name]] += pods
		return nil
	}
	type child struct {
		d    *Domain
		free int
	}
	var children []child
	for _, c := range d.Children {
		if f := o.Free(c); f > 0 {
			children = append(children, child{c, f})
		}
	}
	// Ascending by free slots, then by name: the order of preference.
	sort.Slice(children, func(i, j int) bool {
		if children[i].free != children[j].free {
			return children[i].free < children[j].free
		}
		return children[i].d.Name < children[j].d.Name
	})
	picks := o.minParts(d, pods)
	used := make([]bool, len(children))
	var parts []*Domain
	remaining := pods
	for ; picks > 0 && remaining > 0; picks-- {
		// largest(n) sums the n largest unused children, skipping skip.
		largest := func(n, skip int) int {
			sum := 0
			for i := len(children) - 1; i >= 0 && n > 0; i-- {
				if used[i] || i == skip {
					continue
				}
				sum += children[i].free
				n--
			}
			return sum
		}
		for i, c := range children {
			if used[i] || c.free+largest(picks-1, i) < remaining {
				continue
			}
			take := min(c.free, remaining)
			used[i] = true
			o.fill(c.d, take, out)
			parts = append(parts, c.d)
			remaining -= take
			break
		}
	}
	return parts
}

// LowerBound is the fewest domains of a level that any placement of pods
// can use given the overlay's free capacity, and false when the
// whole cluster cannot hold them. At NodeLevel it counts nodes.
func (o *Overlay) LowerBound(pods, level int) (int, bool) {
	domains := o.tree.Domains(level)
	free := make([]int, 0, len(domains))
	for _, d := range domains {
		if f := o.Free(d); f > 0 {
			free = append(free, f)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(free)))
	sum := 0
	for k, f := range free {
		sum += f
		if sum >= pods {
			return k + 1, true
		}
	}
	return 0, pods <= 0
}

// Span is the number of distinct domains of a level that the nodes touch.
func (t *Tree) Span(nodes []int, level int) int {
	seen := map[*Domain]bool{}
	for _, i := range nodes {
		seen[t.Ancestor(i, level)] = true
	}
	return len(seen)
}
