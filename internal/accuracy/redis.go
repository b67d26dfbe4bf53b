package accuracy

import (
	"time"

	"github.com/redis/go-redis/v9"

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
	client, err := openClient(url)
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

// openClient is the client of a replay's store on the Redis at url, its
// keys kept longer (keepLonger).
func openClient(url string) (redis.UniversalClient, error) {
	client, err := redisstore.NewClient(redisstore.ClientOptions{URL: url, Timeout: redisTimeout})
	if err != nil {
		return nil, err
	}
	client.AddHook(redisstore.LongerTTLs(keepLonger))
	return client, nil
}

// keepLonger is how much longer than the store asks a replay's keys
// live (redisstore.LongerTTLs). The store sets a key's TTL from the
// replay's instants and Redis counts it down by its own clock: a replay
// that runs slower than real time (a loaded machine) would otherwise see
// a window's counter expire before the replay reaches the window's end,
// and its count start again, so that the figures depended on the
// machine's speed. A run's keys have a prefix of their own
// (Config.KeyPrefix), so a later run on the same Redis does not find them.
const keepLonger = time.Minute
