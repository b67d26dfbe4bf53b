package limits

import (
	"math/rand"
	"sync"
	"testing"
	"time"
)

// The kept frame is only ever answered for instants inside it: goroutines
// jumping at random across the windows of four calendars around a DST
// change and a leap day always get the frame computed afresh.
func TestKeptFrameIsTheComputedOne(t *testing.T) {
	berlin, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cals := []Calendar{{CalendarDay, berlin}, {CalendarWeek, berlin}, {CalendarMonth, berlin}, {CalendarYear, time.UTC}}
	from := time.Date(2024, 2, 27, 0, 0, 0, 0, time.UTC).UnixMicro() // the leap day, then March's 23 h day
	span := (40 * 24 * time.Hour).Microseconds()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for range 5000 {
				c := cals[r.Intn(len(cals))]
				now := from + r.Int63n(span)
				if got, want := calendarFrame(c, now), computeFrame(c, now); got != want {
					t.Errorf("%v at %d: kept %+v, computed %+v", c, now, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}
