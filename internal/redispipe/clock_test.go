package redispipe

import (
	"strconv"
	"testing"
	"time"
)

// TestRedisClockSkew: the estimate of Redis's clock follows Redis, not the
// local clock, whatever their difference, and keeps the sample with the
// tightest bound until a newer one beats its aged bound.
func TestRedisClockSkew(t *testing.T) {
	for _, skew := range []int64{0, time.Hour.Microseconds(), -365 * 24 * time.Hour.Microseconds()} {
		t.Run(strconv.FormatInt(skew, 10), func(t *testing.T) {
			var c Clock
			if _, _, ok := c.Now(); ok {
				t.Fatal("an estimate before any sample")
			}
			l := LocalMicros()
			// Redis read l+skew+10 within a round trip of 100 µs around l.
			c.Observe(l-50, l+50, l+skew+10)
			now, u, ok := c.Now()
			if !ok || u < 50 || u > 1000 {
				t.Fatalf("estimate %d ± %d (%v), want ± 50 µs and a little", now-l-skew, u, ok)
			}
			if d := now - (LocalMicros() + skew + 10); d < -100 || d > 100 {
				t.Errorf("estimate off by %d µs", d)
			}
			// A slower round trip does not replace it.
			c.Observe(l-5000, l+5000, l+skew+4000)
			if now, _, _ := c.Now(); now-(LocalMicros()+skew) > 1000 {
				t.Errorf("a sample with a 10 ms round trip replaced one of 100 µs")
			}
			// A faster one does.
			c.Observe(l, l+2, l+skew+1)
			if _, u, _ := c.Now(); u > 100 {
				t.Errorf("bound %d after a 2 µs round trip", u)
			}
			// A step of Redis's clock is followed at once, slow sample or
			// not.
			c.Observe(l, l+3000, l+skew+time.Second.Microseconds())
			if now, _, _ := c.Now(); now-(LocalMicros()+skew) < time.Second.Microseconds()-5000 {
				t.Errorf("estimate %d µs ahead after a step of 1 s", now-(LocalMicros()+skew))
			}
		})
	}
}
