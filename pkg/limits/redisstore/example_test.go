package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
)

// Example wires the store as the binary does from its flags. It has no
// Output line because it needs a Redis at localhost:6379; the tests run the
// same calls against a redis-server they start.
func Example() {
	client, err := redisstore.NewClient(redisstore.ClientOptions{
		URL:     "redis://localhost:6379/0",
		Timeout: 50 * time.Millisecond, // -store-timeout
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store := redisstore.New(client, redisstore.Options{})

	hits := []limits.Hit{{
		Key:   "rl|api|user|alice",
		Limit: limits.Limit{Algorithm: limits.SlidingWindow, Requests: 100, Period: time.Minute},
		Cost:  1,
	}}
	results := make([]limits.Result, len(hits))
	store.Decide(context.Background(), hits, results)
	if r := results[0]; r.Err != nil {
		fmt.Println("store failed, apply the failure mode:", r.Err)
	} else {
		fmt.Println(r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter)
	}
}
