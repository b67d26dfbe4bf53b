package dropin

import (
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// The steps of translate that combine several variables into flags. Each
// reads the variables' values as read checked them (val, on, rawOr),
// never the environment again.

// listeners are HOST and PORT (HTTP), GRPC_HOST and GRPC_PORT or
// GRPC_UDS, DEBUG_HOST and DEBUG_PORT (pprof), on all interfaces by
// default as envoyproxy/ratelimit listens.
func (e *upstreamEnv) listeners() {
	e.set("http-addr", net.JoinHostPort(e.val("HOST"), e.val("PORT")), "HOST", "PORT")
	grpcAddr := net.JoinHostPort(e.val("GRPC_HOST"), e.val("GRPC_PORT"))
	if uds := e.val("GRPC_UDS"); uds != "" {
		grpcAddr = "unix:" + uds
	}
	e.set("grpc-addr", grpcAddr, "GRPC_HOST", "GRPC_PORT", "GRPC_UDS")
	e.set("debug-addr", net.JoinHostPort(e.val("DEBUG_HOST"), e.val("DEBUG_PORT")), "DEBUG_HOST", "DEBUG_PORT")
}

// limitsSource is CONFIG_TYPE: FILE reads the runtime directory,
// GRPC_XDS_SOTW an xDS server, whose variables are flags of their own
// (the table's, which need CONFIG_TYPE=GRPC_XDS_SOTW).
func (e *upstreamEnv) limitsSource() {
	if e.bad["CONFIG_TYPE"] || e.val("CONFIG_TYPE") != "FILE" {
		return // refused as read, or xDS
	}
	root, sub, app := e.val("RUNTIME_ROOT"), e.val("RUNTIME_SUBDIRECTORY"), e.val("RUNTIME_APPDIRECTORY")
	// What the directory holds besides its limits files is reported at
	// every load, the start's and each reload's alike (config.NotLoaded),
	// and served through.
	e.set("config", filepath.Join(root, sub, app), "RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY")
}

// grpcTLS is GRPC_SERVER_USE_TLS with its certificate and key, and the
// client CA that makes it mutual: GRPC_CLIENT_TLS_CACERT, or Envoy
// Gateway's GRPC_SERVER_TLS_CA_CERT, which means the same. Without
// GRPC_SERVER_USE_TLS the files are ignored, as there.
func (e *upstreamEnv) grpcTLS() {
	cert, key := e.val("GRPC_SERVER_TLS_CERT"), e.val("GRPC_SERVER_TLS_KEY")
	ca, egCA := e.val("GRPC_CLIENT_TLS_CACERT"), e.val("GRPC_SERVER_TLS_CA_CERT")
	san := e.val("GRPC_CLIENT_TLS_SAN")
	switch {
	case !e.on("GRPC_SERVER_USE_TLS"):
		return
	case cert == "" || key == "":
		e.fail("GRPC_SERVER_USE_TLS", "true", "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY, the server's certificate and key")
		return
	case ca != "" && egCA != "" && ca != egCA:
		e.fail("GRPC_SERVER_TLS_CA_CERT", egCA, "names another CA than GRPC_CLIENT_TLS_CACERT="+strconv.Quote(ca)+": set one")
		return
	}
	e.set("grpc-tls-cert", cert, "GRPC_SERVER_TLS_CERT")
	e.set("grpc-tls-key", key, "GRPC_SERVER_TLS_KEY")
	if ca == "" {
		ca = egCA
	}
	if ca != "" {
		e.set("grpc-tls-client-ca", ca, "GRPC_CLIENT_TLS_CACERT", "GRPC_SERVER_TLS_CA_CERT")
	}
	// As there, the SAN is checked only of a client certificate the CA
	// verified; without a client CA none is asked for, and the SAN does
	// nothing.
	if san != "" && ca != "" {
		e.set("grpc-tls-client-san", san, "GRPC_CLIENT_TLS_SAN")
	}
}

// redis is the Redis to count in: REDIS_SOCKET_TYPE, REDIS_TYPE and
// REDIS_URL in their forms, with REDIS_AUTH and REDIS_SENTINEL_AUTH and
// REDIS_TLS. (Its TLS files, REDIS_TIMEOUT and CACHE_KEY_PREFIX are flags
// of their own.)
func (e *upstreamEnv) redis() {
	e.redisAuth()
	if e.bad["REDIS_SOCKET_TYPE"] || e.bad["REDIS_TYPE"] {
		return // refused as read
	}
	unix := e.val("REDIS_SOCKET_TYPE") == "unix"
	typ, rawURL := e.val("REDIS_TYPE"), e.val("REDIS_URL")
	if typ == "single" {
		e.singleRedis(rawURL, unix)
		return
	}
	if unix {
		e.fail("REDIS_SOCKET_TYPE", e.rawOr("REDIS_SOCKET_TYPE"), "REDIS_TYPE="+e.rawOr("REDIS_TYPE")+" reaches its nodes over tcp: want REDIS_SOCKET_TYPE=tcp")
		return
	}
	nodes := strings.Split(rawURL, ",")
	flagName := "redis-cluster"
	if typ == "sentinel" {
		if len(nodes) < 2 || nodes[0] == "" {
			e.fail("REDIS_URL", rawURL, "want MASTER,HOST:PORT[,HOST:PORT...] for REDIS_TYPE=sentinel: the master's name, then the Sentinels")
			return
		}
		e.set("redis-sentinel-master", nodes[0], "REDIS_URL")
		nodes, flagName = nodes[1:], "redis-sentinel"
		e.sentinelAuth()
	}
	addrs, ok := e.nodeAddrs(rawURL, nodes)
	if !ok {
		return
	}
	e.set(flagName, strings.Join(addrs, ","), "REDIS_URL")
	if e.on("REDIS_TLS") {
		e.set("redis-tls", "true", "REDIS_TLS")
	}
}

// redisAuth is REDIS_AUTH: PASSWORD or USER:PASSWORD.
func (e *upstreamEnv) redisAuth() {
	auth := e.val("REDIS_AUTH")
	if auth == "" {
		return
	}
	user, pass, hasUser := strings.Cut(auth, ":")
	if !hasUser {
		user, pass = "", auth
	}
	if user != "" {
		e.set("redis-username", user, "REDIS_AUTH")
	}
	e.set("redis-password", pass, "REDIS_AUTH")
}

// singleRedis is REDIS_TYPE=single: a unix socket's path, or host:port
// (or a redis:// URL, which envoyproxy/ratelimit's client also takes).
func (e *upstreamEnv) singleRedis(rawURL string, unix bool) {
	useTLS := e.on("REDIS_TLS")
	if unix {
		if useTLS {
			e.fail("REDIS_TLS", "true", "TLS needs REDIS_SOCKET_TYPE=tcp")
			return
		}
		if !filepath.IsAbs(rawURL) {
			e.fail("REDIS_URL", rawURL, "want the absolute path of Redis's unix socket for REDIS_SOCKET_TYPE=unix")
			return
		}
		e.set("redis-url", (&url.URL{Scheme: "unix", Path: rawURL}).String(), "REDIS_URL", "REDIS_SOCKET_TYPE")
		return
	}
	u, ok := e.redisURL(rawURL)
	if !ok {
		return
	}
	if useTLS {
		u.Scheme = "rediss"
	}
	if e.val("REDIS_AUTH") != "" {
		u.User = nil // REDIS_AUTH wins over the URL's, as there
	}
	e.set("redis-url", u.String(), "REDIS_URL", "REDIS_TLS")
}

// redisURL parses host:port or redis://[user:pass@]host:port[/db] (the
// query's username, password and db too, as envoyproxy/ratelimit's client
// reads them) into a redis:// URL.
func (e *upstreamEnv) redisURL(raw string) (*url.URL, bool) {
	const want = "want HOST:PORT or redis://[USER:PASSWORD@]HOST:PORT[/DB] (REDIS_TLS=true for TLS)"
	if !strings.Contains(raw, "://") {
		if !validHostPort(raw) {
			e.fail("REDIS_URL", raw, want)
			return nil, false
		}
		return &url.URL{Scheme: "redis", Host: raw}, true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "redis" || !validHostPort(u.Host) {
		e.fail("REDIS_URL", raw, want)
		return nil, false
	}
	q := u.Query()
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = q.Get("db")
	}
	if db != "" {
		if _, err := strconv.Atoi(db); err != nil {
			e.fail("REDIS_URL", raw, want+"; the database is a number")
			return nil, false
		}
	}
	user := u.User
	if user == nil && (q.Get("username") != "" || q.Get("password") != "") {
		user = url.UserPassword(q.Get("username"), q.Get("password"))
	}
	out := &url.URL{Scheme: "redis", Host: u.Host, User: user}
	if db != "" {
		out.Path = "/" + db
	}
	return out, true
}

// nodeAddrs checks the host:port (or redis://host:port) of a cluster's
// nodes or of the Sentinels.
func (e *upstreamEnv) nodeAddrs(raw string, nodes []string) ([]string, bool) {
	var addrs []string
	for _, n := range nodes {
		n = strings.TrimPrefix(strings.TrimSpace(n), "redis://")
		if !validHostPort(n) {
			typ, form := e.rawOr("REDIS_TYPE"), "HOST:PORT,HOST:PORT..."
			if e.val("REDIS_TYPE") == "sentinel" {
				form = "MASTER,HOST:PORT[,HOST:PORT...]"
			}
			e.fail("REDIS_URL", raw, "want "+form+" for REDIS_TYPE="+typ+" (credentials in REDIS_AUTH)")
			return nil, false
		}
		addrs = append(addrs, n)
	}
	return addrs, true
}

// sentinelAuth is REDIS_SENTINEL_AUTH, the Sentinels' own credentials:
// PASSWORD or USER:PASSWORD.
func (e *upstreamEnv) sentinelAuth() {
	auth := e.val("REDIS_SENTINEL_AUTH")
	if auth == "" {
		return
	}
	if user, pass, ok := strings.Cut(auth, ":"); ok {
		if user != "" {
			e.set("redis-sentinel-username", user, "REDIS_SENTINEL_AUTH")
		}
		auth = pass
	}
	e.set("redis-sentinel-password", auth, "REDIS_SENTINEL_AUTH")
}

// validHostPort reports whether s is host:port with a numeric port.
func validHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n <= 65535
}

// localCache is LOCAL_CACHE_SIZE_IN_BYTES, envoyproxy/ratelimit's cache of
// the keys found over their limit, which answers them without Redis until
// their window ends. envoy-rls's over-limit cache plays that part; it holds
// refused keys until the reset Redis gave, with no size in bytes, so the
// size only turns it on (0, the default there, turns it off).
func (e *upstreamEnv) localCache() {
	if !e.bad["LOCAL_CACHE_SIZE_IN_BYTES"] {
		e.set("over-limit-cache", strconv.FormatBool(e.val("LOCAL_CACHE_SIZE_IN_BYTES") != "0"), "LOCAL_CACHE_SIZE_IN_BYTES")
	}
}
