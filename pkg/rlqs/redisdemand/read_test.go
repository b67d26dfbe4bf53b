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

// demandReader is what explain reads a store with.
type demandReader interface {
	rlqs.DemandStore
	Demands(ctx context.Context, bucket string) (map[string]share.Demand, error)
}

// Demands reads what RecordAll wrote, from another store on the same
// Redis (explain's), leaves out the expired, and writes nothing.
func TestDemandsReadOnly(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	cluster := redistest.StartCluster(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	mem := rlqs.NewMemory(time.Now)
	for name, pair := range map[string][2]demandReader{
		"redis":   {redisdemand.New(c, "envoy-rls:"), redisdemand.New(c, "envoy-rls:")},
		"cluster": {redisdemand.New(cc, "envoy-rls:"), redisdemand.New(cc, "envoy-rls:")},
		"memory":  {mem, mem},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			writer, reader := pair[0], pair[1]
			if _, err := record(ctx, writer, "b", "short", share.Demand{Rate: 1, Known: true}, 100*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if _, err := record(ctx, writer, "b", "long", share.Demand{Rate: 2, Known: true}, time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := record(ctx, writer, "b", "first", share.Demand{}, time.Minute); err != nil {
				t.Fatal(err)
			}
			got, err := reader.Demands(ctx, "b")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || got["long"] != (share.Demand{Rate: 2, Known: true}) || got["first"].Known {
				t.Fatalf("got %v, want short, long and first (unknown)", got)
			}
			time.Sleep(200 * time.Millisecond)
			if got, _ = reader.Demands(ctx, "b"); len(got) != 2 || got["short"] != (share.Demand{}) {
				t.Fatalf("after short expired: got %v, want long and first", got)
			}
			if none, err := reader.Demands(ctx, "nobody"); err != nil || len(none) != 0 {
				t.Fatalf("a bucket nobody reported: %v, %v", none, err)
			}
		})
	}
	// Nothing was written by the reads: the expired field is still in the
	// hash (only a record deletes it), and no hash was made for "nobody".
	st := redisdemand.New(c, "envoy-rls:")
	if n, _ := c.HLen(context.Background(), st.Key("b")).Result(); n != 3 {
		t.Fatalf("the hash holds %d fields after the reads, want the 3 recorded", n)
	}
	if n, _ := c.Exists(context.Background(), st.Key("nobody")).Result(); n != 0 {
		t.Fatal("a read made a hash")
	}
}
