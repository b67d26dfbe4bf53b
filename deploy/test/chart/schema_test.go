package chart

import (
	"strings"
	"testing"
)

// TestSchemaRefuses: bad values are refused before anything is rendered
// (values.schema.json) or by a template's fail, each with a message that
// names the value and what is wrong with it.
func TestSchemaRefuses(t *testing.T) {
	cases := []struct{ values, want string }{
		{"failureMode: open\n", "at '/failureMode': value must be one of 'allow', 'deny', 'local', 'error'"},
		{"replicaCount: -1\n", "at '/replicaCount': minimum: got -1, want 0"},
		{"replicaCount: two\n", "at '/replicaCount': got string, want integer"},
		{"replicas: 3\n", "additional properties 'replicas' not allowed"},
		{"image: {repository: ''}\n", "at '/image/repository': minLength"},
		{"logLevel: verbose\n", "at '/logLevel': value must be one of 'debug', 'info', 'warn', 'error'"},
		{"limits: [a]\n", "at '/limits': got array, want string or object"},
		{"redis: {url: 'http://redis:6379'}\n", "at '/redis/url'"},
		{"redis: {cluster: {addrs: [redis]}}\n", "at '/redis/cluster/addrs/0'"},
		{"redis: {keyPrefix: 'a{b}'}\n", "at '/redis/keyPrefix'"},
		{"redis: {tls: {enabled: true, existingSecret: s, certKey: tls.crt}}\n", "at '/redis/tls/keyKey'"},
		{"redis: {sentinal: {addrs: [s:26379]}}\n", "additional properties 'sentinal' not allowed"},
		{"grpc: {port: 70000}\n", "at '/grpc/port': maximum: got 70,000, want 65,535"},
		{"grpc: {tls: {enabled: true}}\n", "at '/grpc/tls/existingSecret': minLength"},
		{"service: {type: ExternalName}\n", "at '/service/type'"},
		{"extraArgs: [shadow-mode]\n", "at '/extraArgs/0'"},
		{"autoscaling: {targetCPUUtilizationPercentage: 150}\n", "at '/autoscaling/targetCPUUtilizationPercentage'"},
		{"podDisruptionBudget: {maxUnavailable: half}\n", "at '/podDisruptionBudget/maxUnavailable'"},
		{"serviceMonitor: {interval: soon}\n", "at '/serviceMonitor/interval'"},
		{"livenessProbe: {timeoutSecond: 3}\n", "additional properties 'timeoutSecond' not allowed"},
		{"replicaCount: 3\n", "replicaCount is 3 on the embedded store, where each pod counts on its own"},
		{"autoscaling: {enabled: true}\n", "autoscaling.enabled on the embedded store, where each pod counts on its own"},
		{"redis: {url: 'redis:6379', cluster: {addrs: ['c:6379']}}\n", "set one of redis.url, redis.sentinel and redis.cluster, not several"},
		{"redis: {sentinel: {addrs: ['s:26379']}}\n", "redis.sentinel: set both addrs and master"},
	}
	for _, c := range cases {
		_, err := renderErr(t, values(t, c.values))
		if err == nil {
			t.Errorf("%q: rendered, want refused with %q", c.values, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: refused with\n%v\nwant a message holding %q", c.values, err, c.want)
		}
	}
}
