//go:build race

package config_test

// raceEnabled is set when the race detector, which slows parsing about
// tenfold, is on.
const raceEnabled = true
