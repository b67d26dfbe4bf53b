package share

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// A client's share from a snapshot, with its demand replaced or added, is
// what Divide gives over the same demands; the snapshot's own shares sum
// to the limit, never more.
func TestDivisionIsDivide(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 3000; round++ {
		n := r.IntN(12)
		limit := []float64{0, 1, 100, 1000 * r.Float64()}[r.IntN(4)]
		floor := []float64{0, 0, 0.1, 0.5, 1}[r.IntN(5)]
		demands := map[string]Demand{}
		for i := 0; i < n; i++ {
			demands[fmt.Sprint("c", i)] = randomDemand(r, limit)
		}
		div := NewDivision(demands)
		sum := 0.0
		for id, d := range demands {
			sum += div.Share(limit, floor, id, d)
		}
		if sum > limit*(1+1e-9) {
			t.Fatalf("round %d: the snapshot's shares sum to %v, over %v", round, sum, limit)
		}
		// Replace one client's demand, or add a new client.
		id := "new"
		if n > 0 && r.IntN(2) == 0 {
			id = fmt.Sprint("c", r.IntN(n))
		}
		mine := randomDemand(r, limit)
		after := map[string]Demand{}
		for k, v := range demands {
			after[k] = v
		}
		after[id] = mine
		got := div.Share(limit, floor, id, mine)
		if want := divideOf(limit, floor, after, id); math.Abs(got-want) > 1e-9*max(1, limit) {
			t.Fatalf("round %d: limit %v, floor %v, demands %v, %s wants %v: share %v, Divide gives %v", round, limit, floor, demands, id, mine, got, want)
		}
	}
}

func randomDemand(r *rand.Rand, limit float64) Demand {
	switch r.IntN(6) {
	case 0:
		return Demand{}
	case 1:
		return Demand{Rate: 0, Known: true}
	case 2: // ties
		return Demand{Rate: 10, Known: true}
	}
	return Demand{Rate: r.Float64() * limit, Known: true}
}

func divideOf(limit, floor float64, demands map[string]Demand, id string) float64 {
	var ds []Demand
	at := -1
	for k, v := range demands {
		if k == id {
			at = len(ds)
		}
		ds = append(ds, v)
	}
	return Divide(limit, floor, ds)[at]
}

// A snapshot of a thousand clients answers a share in microseconds: the
// snapshot is not copied or sorted again.
func BenchmarkDivisionShare(b *testing.B) {
	demands := map[string]Demand{}
	for i := 0; i < 1000; i++ {
		demands[fmt.Sprint("c", i)] = Demand{Rate: float64(i % 50), Known: true}
	}
	div := NewDivision(demands)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		div.Share(1000, 0.1, "c7", Demand{Rate: 30, Known: true})
	}
}
