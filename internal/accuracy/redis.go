package accuracy

import (
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
)

// redisTimeout bounds each command of a replay: generous, since a replay
// on a busy machine is no service with a deadline to keep, and a timeout
// would end the run.
const redisTimeout = 30 * time.Second

// OpenRedis returns a Store decider on the Redis at url (redis://host:port),
// deciding through package redisstore with the replay's instants as its
// clock, and the function that closes it.
func OpenRedis(url string) (*Store, func(), error) {
	client, err := redisstore.NewClient(redisstore.ClientOptions{URL: url, Timeout: redisTimeout})
	if err != nil {
		return nil, nil, err
	}
	d := &Store{}
	s := redisstore.New(client, redisstore.Options{Clock: d.Clock, Batching: redisstore.BatchOff})
	d.Store = s
	return d, func() {
		s.Close()
		client.Close() //nolint:errcheck // nothing is left to flush
	}, nil
}
