package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CPU is the CPU time a Redis server has used so far, user and system,
// read from the reply of INFO CPU: what benchmarks subtract to tell the
// server's cost of a run apart from the client's.
func CPU(info string) (time.Duration, error) {
	var total float64
	seen := 0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("redistest: INFO CPU's %s: %w", k, err)
		}
		total += f
		seen++
	}
	if seen != 2 {
		return 0, fmt.Errorf("redistest: INFO CPU without used_cpu_sys and used_cpu_user")
	}
	return time.Duration(total * float64(time.Second)), nil
}

// CPU is the CPU time the server has used so far (see the function CPU).
func (s *Server) CPU() (time.Duration, error) {
	info, err := s.Do("INFO", "CPU")
	if err != nil {
		return 0, err
	}
	return CPU(info)
}
