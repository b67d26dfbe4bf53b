package rlqs

import "sync"

// ruleTotals are, per rule (a bounded label: the domain and the rule's
// place in its tree, never a bucket's values), the rates this instance's
// streams were last assigned and the limits of the buckets they hold, so
// that a dashboard can set what the fleet may let through beside the
// limit. With Redis each instance holds part of each bucket: sum the
// assigned over instances, take the largest limit.
type ruleTotals struct {
	mu       sync.Mutex
	assigned map[string]map[string]float64 // rule: client and bucket key: requests per second
	limits   map[string]map[string]float64 // rule: bucket key: its limit, per second
	holders  map[string]int                // bucket key: this instance's streams that hold it
}

func newRuleTotals() *ruleTotals {
	return &ruleTotals{assigned: map[string]map[string]float64{}, limits: map[string]map[string]float64{}, holders: map[string]int{}}
}

// set notes that client was assigned rate of the bucket key of rule, whose
// limit is limit.
func (r *ruleTotals) set(rule, client, key string, rate, limit float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.assigned[rule] == nil {
		r.assigned[rule] = map[string]float64{}
		r.limits[rule] = map[string]float64{}
	}
	id := client + "\x00" + key
	if _, held := r.assigned[rule][id]; !held {
		r.holders[key]++
	}
	r.assigned[rule][id] = rate
	r.limits[rule][key] = limit
}

// drop forgets client's assignment of the bucket key of rule.
func (r *ruleTotals) drop(rule, client, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.assigned[rule]
	if _, ok := a[client+"\x00"+key]; !ok {
		return
	}
	delete(a, client+"\x00"+key)
	if r.holders[key]--; r.holders[key] <= 0 {
		delete(r.holders, key)
		delete(r.limits[rule], key)
	}
	if len(a) == 0 {
		delete(r.assigned, rule)
		delete(r.limits, rule)
	}
}

// each calls f with every rule's totals.
func (r *ruleTotals) each(f func(rule string, assigned, limit float64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for rule, a := range r.assigned {
		sa, sl := 0.0, 0.0
		for _, v := range a {
			sa += v
		}
		for _, v := range r.limits[rule] {
			sl += v
		}
		f(rule, sa, sl)
	}
}
