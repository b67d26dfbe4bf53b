package share

import (
	"sort"
)

// Division is a snapshot of the demands of one bucket's clients, read once
// and kept so that each client's max-min fair share can be computed again
// with its own, fresher demand in its place, in O(log n) and without
// copying the snapshot: the service reads every client's demand once per
// refresh period, not at every report. It is immutable, so safe for
// concurrent use; the zero value is an empty snapshot.
type Division struct {
	known   []float64 // the known demands, clamped to zero, ascending
	prefix  []float64 // prefix[i] is the sum of known[:i]
	unknown int       // the clients whose demand is unknown
	clients map[string]Demand
}

// NewDivision takes a snapshot of demands, by client id.
func NewDivision(demands map[string]Demand) *Division {
	d := &Division{clients: make(map[string]Demand, len(demands))}
	for id, v := range demands {
		v = clamp(v)
		d.clients[id] = v
		if v.Known {
			d.known = append(d.known, v.Rate)
		} else {
			d.unknown++
		}
	}
	sort.Float64s(d.known)
	d.prefix = make([]float64, len(d.known)+1)
	for i, v := range d.known {
		d.prefix[i+1] = d.prefix[i] + v
	}
	return d
}

func clamp(d Demand) Demand {
	if d.Known && !(d.Rate > 0) {
		d.Rate = 0
	}
	return d
}

// Len is the number of clients in the snapshot.
func (d *Division) Len() int { return len(d.clients) }

// Has reports whether client is in the snapshot.
func (d *Division) Has(client string) bool {
	_, ok := d.clients[client]
	return ok
}

// Clients returns the snapshot's demands, by client id; the map is the
// snapshot's own and must not be changed.
func (d *Division) Clients() map[string]Demand { return d.clients }

// Share is client's share of limit, as Divide would give it with floor
// over the snapshot with client's demand replaced by mine (or added, for a
// client the snapshot does not hold): the others are divided as they were
// read, client as it is now. With mine the demand read, the shares of the
// snapshot's clients sum to limit, never more.
func (d *Division) Share(limit, floor float64, client string, mine Demand) float64 {
	if !(limit > 0) {
		return 0
	}
	mine = clamp(mine)
	old, had := d.clients[client]
	v := view{d: d, n: len(d.clients), unknown: d.unknown}
	if had {
		if old.Known {
			v.removed, v.hasRemoved = old.Rate, true
		} else {
			v.unknown--
		}
	} else {
		v.n++
	}
	v.least = lowest(limit, floor, v.n)
	v.low = sort.SearchFloat64s(d.known, v.least)
	v.q = limit / float64(v.n) // an unknown demand wants an equal share
	v.mine = v.q
	if mine.Known {
		v.mine = max(mine.Rate, v.least)
	}
	v.removed = max(v.removed, v.least)
	level, ok := v.level(limit)
	if !ok {
		// Everyone is satisfied: the surplus goes to all alike.
		return v.mine + (limit-v.total())/float64(v.n)
	}
	return min(v.mine, level)
}

// view is the snapshot with one client's demand replaced: a multiset of n
// wants, the known ones less removed, unknown copies of q, and mine; every
// want counts as at least least (the floor's part of one client), so the
// low known wants, the first low of them, count as least.
type view struct {
	d          *Division
	n, unknown int
	removed    float64
	hasRemoved bool
	q, mine    float64
	least      float64
	low        int
}

// below returns how many wants are under x, and their sum.
func (v *view) below(x float64) (count int, sum float64) {
	if x > v.least {
		j := sort.SearchFloat64s(v.d.known, x)
		count, sum = j, v.d.prefix[j]-v.d.prefix[v.low]+float64(v.low)*v.least
	}
	if v.hasRemoved && v.removed < x {
		count--
		sum -= v.removed
	}
	if v.q < x {
		count += v.unknown
		sum += float64(v.unknown) * v.q
	}
	if v.mine < x {
		count++
		sum += v.mine
	}
	return count, sum
}

// filled is what a water level of x gives out: every want up to x.
func (v *view) filled(x float64) float64 {
	count, sum := v.below(x)
	return sum + float64(v.n-count)*x
}

func (v *view) total() float64 {
	k := len(v.d.known)
	t := v.d.prefix[k] - v.d.prefix[v.low] + float64(v.low)*v.least + float64(v.unknown)*v.q + v.mine
	if v.hasRemoved {
		t -= v.removed
	}
	return t
}

// level returns the water level of max-min fairness: the share of every
// client that wants at least as much, found as the lowest want at which
// filling up to it would give out the limit (filled is increasing, and
// linear between two wants), then solved on the stretch below it. ok is
// false when the wants sum to no more than the limit.
func (v *view) level(limit float64) (_ float64, ok bool) {
	best, found := 0.0, false
	consider := func(x float64) {
		if (!found || x < best) && v.filled(x) >= limit {
			best, found = x, true
		}
	}
	k := v.d.known
	if j := sort.Search(len(k), func(i int) bool { return v.filled(k[i]) >= limit }); j < len(k) {
		consider(k[j])
	}
	if v.unknown > 0 {
		consider(v.q)
	}
	consider(v.mine)
	if !found {
		return 0, false
	}
	count, sum := v.below(best)
	if v.n == count {
		return 0, false
	}
	return (limit - sum) / float64(v.n-count), true
}
