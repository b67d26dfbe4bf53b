package redisdemand_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
)

var _ rlqs.DemandStore = (*redisdemand.Store)(nil)

// The same behaviour from every store, a Redis Cluster's too: a record returns every live client's
// demand, a forgotten or expired one is gone.
func TestStores(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	cluster := redistest.StartCluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	stores := map[string]rlqs.DemandStore{
		"redis":   redisdemand.New(c, "envoy-rls:"),
		"cluster": redisdemand.New(cc, "envoy-rls:"),
		"memory":  rlqs.NewMemory(time.Now),
	}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if _, err := record(ctx, st, "b", "gone", share.Demand{Rate: 1, Known: true}, 150*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if _, err := record(ctx, st, "b", "left", share.Demand{Rate: 2, Known: true}, time.Minute); err != nil {
				t.Fatal(err)
			}
			got, err := record(ctx, st, "b", "new", share.Demand{}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || got["left"] != (share.Demand{Rate: 2, Known: true}) || got["new"].Known {
				t.Fatalf("got %v, want three demands", got)
			}
			if err := st.Forget(ctx, "b", "left"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // "gone" expires
			got, err = record(ctx, st, "b", "new", share.Demand{Rate: 0.5, Known: true}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got["new"] != (share.Demand{Rate: 0.5, Known: true}) {
				t.Fatalf("after a forget and an expiry: got %v, want only new", got)
			}
			other, _ := record(ctx, st, "other bucket", "x", share.Demand{}, time.Minute)
			if len(other) != 1 {
				t.Fatalf("buckets share demands: %v", other)
			}
		})
	}
}

func TestKeyIsOneHashTag(t *testing.T) {
	k := redisdemand.New(nil, "p:").Key("edge\x00path_/api\x00{x}")
	if k[:8] != "p:rlqs:{" || k[len(k)-1] != '}' {
		t.Fatalf("key %q", k)
	}
}

// record is RecordAll of one bucket, then ReadAll of it.
func record(ctx context.Context, st rlqs.DemandStore, bucket, client string, d share.Demand, ttl time.Duration) (map[string]share.Demand, error) {
	if err := st.RecordAll(ctx, client, []string{bucket}, []share.Demand{d}, ttl); err != nil {
		return nil, err
	}
	all, err := st.ReadAll(ctx, []string{bucket})
	if err != nil {
		return nil, err
	}
	return all[0], nil
}

// A report's buckets are recorded together, and read together, and the entries found
// expired are deleted from Redis, not only left out.
func TestRecordAllBuckets(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	st := redisdemand.New(c, "p:")
	ctx := context.Background()
	if _, err := record(ctx, st, "a", "short", share.Demand{Rate: 9, Known: true}, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if err := st.RecordAll(ctx, "me", []string{"a", "b", "c"}, []share.Demand{{Rate: 1, Known: true}, {}, {Rate: 3, Known: true}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := st.ReadAll(ctx, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || len(got[0]) != 1 || got[0]["me"].Rate != 1 || got[1]["me"].Known || got[2]["me"].Rate != 3 {
		t.Fatalf("got %v", got)
	}
	if fields, err := c.HKeys(ctx, st.Key("a")).Result(); err != nil || len(fields) != 1 || fields[0] != "me" {
		t.Fatalf("bucket a's hash holds %v (%v), want only me: the expired entry deleted", fields, err)
	}
}
