package statsd

import (
	"errors"
	"time"

	dogstatsd "github.com/DataDog/datadog-go/v5/statsd"
)

// dogSink hands stats to DataDog's DogStatsD client, as
// envoyproxy/ratelimit's DogStatsD sink does (the same client, without
// its client-side aggregation): the tags as DogStatsD tags, EXTRA_TAGS'
// first, then a mogrifier's. The client formats and buffers them, adds
// the DD_ENV, DD_SERVICE and DD_VERSION tags and its own telemetry, and
// writes its payloads to the transport from its own goroutine.
type dogSink struct {
	client *dogstatsd.Client
	tags   []string
	mogs   []Mogrifier
	// buf is the tags of one stat (the client copies them into its
	// buffer before the call returns).
	buf []string
}

func newDogSink(w *transport, tags []Tag, mogs []Mogrifier, c counts) (*dogSink, error) {
	client, err := dogstatsd.NewWithWriter(w, dogstatsd.WithoutClientSideAggregation(),
		dogstatsd.WithErrorHandler(func(err error) {
			// The transport counts what it drops; the client's queue,
			// full, drops whole payloads of stats before they reach it.
			var full *dogstatsd.ErrorSenderChannelFull
			if errors.As(err, &full) {
				c.StatsdDropped(uint64(full.LostElements))
			}
		}))
	if err != nil {
		return nil, err
	}
	s := &dogSink{client: client, mogs: mogs}
	for _, t := range tags {
		s.tags = append(s.tags, t.Key+":"+t.Value)
	}
	return s, nil
}

func (s *dogSink) name(name string) (string, []string) {
	s.buf = append(s.buf[:0], s.tags...)
	return mogrify(s.mogs, name, s.buf)
}

func (s *dogSink) Counter(name string, n uint64) {
	name, tags := s.name(name)
	_ = s.client.Count(name, int64(n), tags, 1)
}

func (s *dogSink) Gauge(name string, v uint64) {
	name, tags := s.name(name)
	_ = s.client.Gauge(name, float64(v), tags, 1)
}

func (s *dogSink) Timer(name string, ms uint64) {
	name, tags := s.name(name)
	_ = s.client.Timing(name, time.Duration(ms)*time.Millisecond, tags, 1)
}

// flush writes what the client holds, waiting for its sender.
func (s *dogSink) flush() { _ = s.client.Flush() }
