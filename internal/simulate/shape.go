package simulate

import (
	"fmt"
	"time"
)

// shapes are the seeded trace shapes -shape names.
var shapes = []string{}

// OneOfShapes lists the shapes for the help.
func OneOfShapes() string { return fmt.Sprint(shapes) }

// Shape generates the seeded trace name at rate requests a second for
// duration.
func Shape(name string, rate float64, duration time.Duration, seed uint64, domain string) ([]Event, error) {
	return nil, fmt.Errorf("unknown shape %q (shapes: %v)", name, shapes)
}
