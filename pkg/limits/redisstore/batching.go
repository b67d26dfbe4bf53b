package redisstore

import "github.com/envoy-rls/envoy-rls/internal/redispipe"

// Batching chooses whether concurrent Decide calls share pipelines.
type Batching int

const (
	// BatchAuto, the zero value, merges the calls: on a single Redis all of
	// them; on a cluster one master at a time, each call's share of a
	// master with that master's flushes, so that a master down holds up
	// only the calls for its keys (redispipe).
	BatchAuto Batching = iota
	// BatchOn is BatchAuto.
	BatchOn
	// BatchOff sends one pipeline per call.
	BatchOff
)

// DefaultFlushes is the most merged pipelines in flight at once when
// Options.Flushes is zero, on a near Redis.
const DefaultFlushes = redispipe.DefaultFlushes

// PipelineSpanName names the span of one pipeline sent to Redis.
const PipelineSpanName = redispipe.PipelineSpanName
