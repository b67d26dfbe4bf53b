package server

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

// The /explain endpoint and the service's own headers, as the server
// wires them.

func TestExplainEndpointFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, http.StatusOK},
		{[]string{"-explain-endpoint=false"}, http.StatusNotFound},
	} {
		s := startInProcess(t, tc.args...)
		s.postJSON(t, jsonRequest("a", ""))
		code, body := httpDo(t, "GET", "http://"+s.httpAddr+"/explain?domain=test&descriptor=k=a", "")
		if code != tc.want {
			t.Errorf("%v: /explain %d, want %d", tc.args, code, tc.want)
		}
		if code == http.StatusOK && !strings.Contains(body, "state: remaining 0 of 1") {
			t.Errorf("%v: /explain:\n%s", tc.args, body)
		}
	}
}

// TestResponseHeadersFlags: over the server's real gRPC listener, the
// headers and the 429 body appear exactly when their flags ask.
func TestResponseHeadersFlags(t *testing.T) {
	t.Parallel()
	wait := regexp.MustCompile(`^"one";r=0;t=([0-9]+)$`)
	for _, tc := range []struct {
		args          []string
		headers, body bool
	}{
		{nil, false, false},
		{[]string{"-response-headers"}, true, false},
		{[]string{"-json-429-body"}, false, true},
		{[]string{"-response-headers", "-json-429-body"}, true, true},
	} {
		s := startInProcess(t, tc.args...)
		conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
		first, err := grpcCall(conn, "a")
		if err != nil {
			t.Fatal(err)
		}
		refused, err := grpcCall(conn, "a")
		if err != nil {
			t.Fatal(err)
		}
		h := map[string]string{}
		for _, hv := range refused.GetResponseHeadersToAdd() {
			h[hv.GetKey()] = hv.GetValue()
		}
		if got := len(first.GetResponseHeadersToAdd()) > 0; got != tc.headers {
			t.Errorf("%v: allowed answer has headers %v, want %v", tc.args, first.GetResponseHeadersToAdd(), tc.headers)
		}
		if tc.headers {
			m := wait.FindStringSubmatch(h["RateLimit"])
			if h["RateLimit-Policy"] != `"one";q=1;w=3600` || m == nil || h["Retry-After"] != m[1] {
				t.Errorf("%v: refused headers %v", tc.args, h)
			}
		} else if h["RateLimit"] != "" || h["RateLimit-Policy"] != "" || h["Retry-After"] != "" {
			t.Errorf("%v: headers %v without -response-headers", tc.args, h)
		}
		body := string(refused.GetRawBody())
		if tc.body {
			if !regexp.MustCompile(`^\{"error":"rate limited","retry_after_seconds":[0-9]+,"limit":"one"\}$`).MatchString(body) ||
				h["content-type"] != "application/json" {
				t.Errorf("%v: body %q, headers %v", tc.args, body, h)
			}
		} else if body != "" || h["content-type"] != "" {
			t.Errorf("%v: body %q, headers %v without -json-429-body", tc.args, body, h)
		}
	}
}

func TestResponseHeadersFlagsParse(t *testing.T) {
	o, err := parseFlags(nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.responseHeaders || o.json429Body || !o.explainEndpoint {
		t.Errorf("defaults: headers %v body %v explain %v; want false false true", o.responseHeaders, o.json429Body, o.explainEndpoint)
	}
	vars := map[string]string{"RLS_RESPONSE_HEADERS": "true", "RLS_JSON_429_BODY": "1", "RLS_EXPLAIN_ENDPOINT": "false"}
	if o, err = parseFlags(nil, env(vars)); err != nil {
		t.Fatal(err)
	}
	if !o.responseHeaders || !o.json429Body || o.explainEndpoint {
		t.Errorf("from the environment: headers %v body %v explain %v", o.responseHeaders, o.json429Body, o.explainEndpoint)
	}
	if o, err = parseFlags([]string{"-response-headers=false", "-explain-endpoint"}, env(vars)); err != nil {
		t.Fatal(err)
	}
	if o.responseHeaders || !o.json429Body || !o.explainEndpoint {
		t.Errorf("flags over the environment: headers %v body %v explain %v", o.responseHeaders, o.json429Body, o.explainEndpoint)
	}
	if _, err := parseFlags(nil, env(map[string]string{"RLS_RESPONSE_HEADERS": "perhaps"})); err == nil || !strings.Contains(err.Error(), "RLS_RESPONSE_HEADERS") {
		t.Errorf("a bad RLS_RESPONSE_HEADERS: %v", err)
	}
}

// TestStoreDescription: explain names the store it reads, never a password.
func TestStoreDescription(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "embedded (this command's own"},
		{Options{redisURL: "redis://user:secret@r:6379/0"}, "Redis redis://user:xxxxx@r:6379/0"},
		{Options{redisCluster: "a:1,b:2"}, "Redis Cluster a:1,b:2"},
		{Options{redisSentinel: "s:26379", redisSentinelMaster: "main", redisSentinelPassword: "secret"}, "Redis master main of Sentinels s:26379"},
	} {
		got := tc.o.StoreDescription()
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "secret") {
			t.Errorf("storeDescription(%+v) = %q, want it to start with %q and hold no password", tc.o, got, tc.want)
		}
	}
}
