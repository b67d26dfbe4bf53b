package config

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// duration reads a Go duration string, such as block_for: 15m (a number of
// seconds alone would hide its unit: 15 is not 15 minutes), for a field of
// type limits.Duration. It is positive: such a field says how long
// something lasts; limits.Limit.Validate checks its bounds and the limits
// it makes sense on.
func (s scalar) duration(at pos) (time.Duration, *Error) {
	v := s.node()
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return 0, at.errorf("want a duration such as 15m or 90s, got %s", got(v))
	}
	d, err := time.ParseDuration(v.Value)
	switch {
	case err != nil:
		return 0, at.errorf("want a duration such as 15m or 90s, got %q", v.Value)
	case d <= 0:
		return 0, at.errorf("must be positive, got %s", v.Value)
	}
	return d, nil
}
