package redisinspect

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// nodeInfo is what INFO says of one master.
type nodeInfo struct {
	addr                  string
	runID, policy         string
	maxMemory, usedMemory int64
	evicted, keys         int64
}

// infos reads INFO of Redis, of every master on a cluster.
func (in *Inspector) infos(ctx context.Context) ([]nodeInfo, error) {
	read := func(ctx context.Context, c *redis.Client) (nodeInfo, error) {
		v, err := c.Info(ctx, "server", "memory", "stats", "keyspace").Result()
		if err != nil {
			return nodeInfo{}, err
		}
		return parseInfo(c.Options().Addr, v), nil
	}
	switch c := in.client.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var nodes []nodeInfo
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := read(ctx, m)
			if err != nil {
				return err
			}
			mu.Lock()
			nodes = append(nodes, n)
			mu.Unlock()
			return nil
		})
		return nodes, err
	case *redis.Client:
		n, err := read(ctx, c)
		return []nodeInfo{n}, err
	}
	return nil, errors.New("a client that cannot read INFO")
}

// parseInfo reads the fields of INFO the inspection uses.
func parseInfo(addr, info string) nodeInfo {
	n := nodeInfo{addr: addr}
	num := func(v string) int64 { x, _ := strconv.ParseInt(v, 10, 64); return x }
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "run_id":
			n.runID = v
		case k == "maxmemory":
			n.maxMemory = num(v)
		case k == "maxmemory_policy":
			n.policy = v
		case k == "used_memory":
			n.usedMemory = num(v)
		case k == "evicted_keys":
			n.evicted = num(v)
		case strings.HasPrefix(k, "db"):
			keys, _, _ := strings.Cut(strings.TrimPrefix(v, "keys="), ",")
			n.keys += num(keys)
		}
	}
	return n
}

// memory fills found from the masters' INFO, and says what it finds once:
// INFO refused, a policy that evicts, keys evicted, memory full; mu is
// held.
func (in *Inspector) memory(found *Inspection, nodes []nodeInfo, infoErr error) {
	if infoErr != nil {
		var refused redis.Error // an answer, not an outage
		if !in.saidInfo && errors.As(infoErr, &refused) {
			in.saidInfo = true
			in.log.Warn("Redis refuses INFO: the checks of its eviction policy and memory are off (a managed Redis may forbid it; +info in the user's ACL rules turns them on)", zap.Error(infoErr))
		}
		// What the last INFO read said stands until the next is read.
		last := in.found.Load()
		found.Policy, found.MaxMemory, found.UsedMemory, found.Evicted = last.Policy, last.MaxMemory, last.UsedMemory, last.Evicted
		return
	}
	for _, n := range nodes {
		found.Evicted += n.evicted
		if n.maxMemory > 0 && (found.MaxMemory == 0 || n.usedMemory*found.MaxMemory > found.UsedMemory*n.maxMemory) {
			found.MaxMemory, found.UsedMemory = n.maxMemory, n.usedMemory
		}
		if found.Policy == "" || n.policy != "noeviction" {
			found.Policy = n.policy
		}
	}
	if found.MaxMemory == 0 && len(nodes) > 0 {
		found.UsedMemory = nodes[0].usedMemory
	}
	switch policy := found.Policy; {
	case found.Evicts() && policy != in.saidPolicy:
		in.saidPolicy = policy
		in.log.Warn("Redis may evict the service's keys: a limit, a lockout or a held slot evicted restarts from nothing; every key the service writes has a TTL, so volatile-* policies evict them too. Set maxmemory-policy noeviction, or give the service a Redis of its own",
			zap.String("maxmemory-policy", policy), zap.Int64("maxmemory", found.MaxMemory), zap.String("safe", "noeviction"))
	case !found.Evicts() && in.saidPolicy != "":
		in.saidPolicy = ""
		in.log.Info("Redis no longer evicts the service's keys", zap.String("maxmemory-policy", policy), zap.Int64("maxmemory", found.MaxMemory))
	}
	if in.infoRead && found.Evicted > in.evicted && time.Since(in.evictedAt) >= evictedSayEvery {
		in.evictedAt = time.Now()
		in.log.Warn("Redis evicted keys: limits, lockouts or held slots may have restarted from nothing",
			zap.Int64("evicted_keys", found.Evicted), zap.Int64("since_last_check", found.Evicted-in.evicted), zap.String("maxmemory-policy", found.Policy))
	}
	in.evicted, in.infoRead = found.Evicted, true
	switch full := found.Full(); {
	case full && !in.saidFull:
		in.log.Error("Redis is out of memory under noeviction: it refuses every charge, so every hit takes its limit's failure mode; raise maxmemory, or give the service a Redis of its own",
			zap.Int64("used_memory", found.UsedMemory), zap.Int64("maxmemory", found.MaxMemory))
	case !full && in.saidFull:
		in.log.Info("Redis has memory again: charges are decided again", zap.Int64("used_memory", found.UsedMemory), zap.Int64("maxmemory", found.MaxMemory))
	}
	in.saidFull = found.Full()
}
