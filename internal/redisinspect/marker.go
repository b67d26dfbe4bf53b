package redisinspect

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// markerRead is a marker key's SET … NX GET, and the master it is on
// ("" on a single Redis).
type markerRead struct {
	key, master string
	cmd         *redis.StringCmd
}

// markerKeys are the keys whose disappearance tells that Redis lost its
// data, by master: under the prefix, without a TTL, holding the token of
// the store that wrote it, named as every key of the service is (the
// prefix, then a hash tag). A single Redis has one, PREFIX{marker}; a
// cluster one per master, PREFIX{mN}:marker, N the first whose hash slot
// is in the master's first range of slots (so the same after a
// failover), since a master may lose its data alone.
func (in *Inspector) markerKeys(ctx context.Context) map[string]string {
	c, ok := in.client.(*redis.ClusterClient)
	if !ok {
		return map[string]string{in.prefix + "{marker}": ""}
	}
	//lint:ignore SA1019 go-redis maps the cluster with CLUSTER SLOTS itself, which the user has; CLUSTER SHARDS would need one more ACL rule
	ranges, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return nil // the next inspection tells
	}
	keys := map[string]string{}
	seen := map[string]bool{}
	for _, r := range ranges {
		if len(r.Nodes) == 0 || seen[r.Nodes[0].Addr] {
			continue
		}
		seen[r.Nodes[0].Addr] = true
		for i := 0; ; i++ {
			tag := "m" + strconv.Itoa(i)
			if slot := int(crc16(tag) % 16384); slot >= int(r.Start) && slot <= int(r.End) {
				keys[in.prefix+"{"+tag+"}:marker"] = r.Nodes[0].Addr
				break
			}
		}
	}
	return keys
}

// crc16 is Redis Cluster's hash of a key's tag (CRC-16/XMODEM), whose
// value modulo 16384 is its slot.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// lostData reads the markers' SET … NX GET and the masters' run_id: a
// marker gone (absent, or another store's new token) means Redis, or the
// master that held it, lost what it held, which is counted and said
// once; a run_id changed with the markers kept, a restart that kept the
// data. mu is held.
func (in *Inspector) lostData(markers []markerRead, nodes []nodeInfo, infoOK bool) {
	restarted := ""
	keys := int64(0)
	if infoOK {
		for _, n := range nodes {
			keys += n.keys
			if was := in.runIDs[n.addr]; was != "" && was != n.runID {
				restarted = n.addr
			}
			in.runIDs[n.addr] = n.runID
		}
	}
	before := in.keys
	if infoOK {
		in.keys = keys
	}
	lost, where := false, ""
	for _, m := range markers {
		v, err := m.cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			v = in.token // absent: this store's token is the marker now
		case err != nil:
			var refused redis.Error
			if errors.As(err, &refused) && !in.saidMarker {
				in.saidMarker = true
				in.log.Warn("Redis refuses the marker key: the check of lost data is off (+set and the keys under the prefix turn it on)", zap.String("marker", m.key), zap.Error(err))
			}
			continue // not read: the next inspection tells
		}
		if was := in.markers[m.key]; was != "" && v != was {
			lost, where = true, m.master
		}
		in.markers[m.key] = v
	}
	switch {
	case lost:
		in.lost.Add(1)
		in.log.Error("Redis lost the service's state: its marker key is gone (FLUSHALL or FLUSHDB, a restart without persistence, a failover to an empty replica); every limit's counts, every lockout and every held slot restart from nothing",
			zap.Int64("keys_before", before), zap.Int64("keys_now", keys), zap.String("master", where),
			zap.Bool("restarted", restarted != ""))
	case restarted != "":
		in.log.Info("Redis restarted and kept the service's state (its marker key is there)", zap.String("master", restarted))
	}
}

// Markers are the keys of the markers the inspections have read, one per
// master on a cluster.
func (in *Inspector) Markers() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Sorted(maps.Keys(in.markers))
}
