package redisinspect

import (
	"testing"
)

// TestCRC16: the hash of the slots of Redis Cluster (its specification's
// check value), which picks each master's marker key.
func TestCRC16(t *testing.T) {
	if got, want := crc16("123456789"), uint16(0x31C3); got != want {
		t.Errorf("crc16(123456789) = %#x, want %#x", got, want)
	}
}

// TestParseInfo reads what the inspections need of INFO, the keys summed
// over the databases.
func TestParseInfo(t *testing.T) {
	info := "# Server\r\nrun_id:abc\r\n# Memory\r\nused_memory:100\r\nmaxmemory:200\r\nmaxmemory_policy:allkeys-lru\r\n" +
		"# Stats\r\nevicted_keys:7\r\n# Keyspace\r\ndb0:keys=3,expires=3,avg_ttl=0\r\ndb1:keys=2,expires=0,avg_ttl=0\r\n"
	got := parseInfo("h:1", info)
	want := nodeInfo{addr: "h:1", runID: "abc", policy: "allkeys-lru", maxMemory: 200, usedMemory: 100, evicted: 7, keys: 5}
	if got != want {
		t.Errorf("parseInfo = %+v, want %+v", got, want)
	}
	if in := (Inspection{Policy: "allkeys-lru", MaxMemory: 200}); !in.Evicts() || in.Full() {
		t.Errorf("%+v: Evicts %v Full %v, want true false", in, in.Evicts(), in.Full())
	}
	if in := (Inspection{Policy: "noeviction", MaxMemory: 200, UsedMemory: 200}); in.Evicts() || !in.Full() {
		t.Errorf("%+v: Evicts %v Full %v, want false true", in, in.Evicts(), in.Full())
	}
}
