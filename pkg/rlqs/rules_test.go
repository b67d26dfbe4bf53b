package rlqs

import "testing"

func TestRuleTotals(t *testing.T) {
	r := newRuleTotals()
	r.set("edge.user", "a", "k1", 10, 100)
	r.set("edge.user", "a", "k1", 20, 100) // a new assignment replaces the last
	r.set("edge.user", "b", "k1", 30, 100)
	r.set("edge.user", "b", "k2", 5, 100) // another bucket of the rule
	sum := func() (a, l float64) {
		r.each(func(_ string, assigned, limit float64) { a, l = assigned, limit })
		return a, l
	}
	if a, l := sum(); a != 55 || l != 200 {
		t.Fatalf("assigned %v of %v, want 55 of 200", a, l)
	}
	r.drop("edge.user", "a", "k1")
	r.drop("edge.user", "a", "k1") // twice is once
	if a, l := sum(); a != 35 || l != 200 {
		t.Fatalf("after a leaves: assigned %v of %v, want 35 of 200", a, l)
	}
	r.drop("edge.user", "b", "k1")
	if a, l := sum(); a != 5 || l != 100 {
		t.Fatalf("after k1 is left: assigned %v of %v, want 5 of 100", a, l)
	}
	r.drop("edge.user", "b", "k2")
	n := 0
	r.each(func(string, float64, float64) { n++ })
	if n != 0 || len(r.holders) != 0 {
		t.Fatalf("%d rules and %d holders left, want none", n, len(r.holders))
	}
}
