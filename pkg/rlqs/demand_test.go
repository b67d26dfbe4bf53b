package rlqs

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// Memory keeps each bucket's clients in a sorted slice: random records,
// forgets and expiries, in any order of client ids, read back as a map of
// the live demands would.
func TestMemoryIsAMap(t *testing.T) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	m := NewMemory(clk.Now)
	type entry struct {
		d       share.Demand
		expires time.Time
	}
	model := map[string]map[string]entry{}
	r := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for op := 0; op < 20_000; op++ {
		b, c := fmt.Sprint("b", r.IntN(4)), fmt.Sprint("c", r.IntN(40))
		switch r.IntN(8) {
		case 0:
			_ = m.Forget(ctx, b, c)
			delete(model[b], c)
		case 1:
			clk.Add(time.Duration(r.IntN(3)) * time.Second)
		case 2:
			got, _ := m.ReadAll(ctx, []string{b})
			want := map[string]share.Demand{}
			for id, e := range model[b] {
				if clk.Now().Before(e.expires) {
					want[id] = e.d
				}
			}
			if !maps.Equal(got[0], want) {
				t.Fatalf("op %d: bucket %s read %v, want %v", op, b, got[0], want)
			}
		default:
			d := share.Demand{Rate: float64(op), Known: true}
			ttl := time.Duration(1+r.IntN(5)) * time.Second
			_ = m.RecordAll(ctx, c, []string{b}, []share.Demand{d}, ttl)
			if model[b] == nil {
				model[b] = map[string]entry{}
			}
			model[b][c] = entry{d: d, expires: clk.Now().Add(ttl)}
		}
	}
}
