package redispipe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultTimeout is the socket timeout NewClient uses when
// ClientOptions.Timeout is zero: the default of -store-timeout.
const DefaultTimeout = 50 * time.Millisecond

// ClientOptions are the -redis-* flags of the binary.
type ClientOptions struct {
	// URL is -redis-url: redis://[user:pass@]host:port[/db], or rediss://
	// for TLS. go-redis query parameters (dial_timeout=…) are honoured.
	URL string
	// Cluster is -redis-cluster: host:port seeds of a Redis Cluster.
	Cluster []string
	// Sentinel is -redis-sentinel: host:port of the Sentinels that watch
	// the master named SentinelMaster (-redis-sentinel-master). The client
	// follows the master through failovers. Exactly one of URL, Cluster and
	// Sentinel must be set.
	Sentinel       []string
	SentinelMaster string
	// SentinelPassword is -redis-sentinel-password, for Sentinels that
	// require AUTH (Username and Password are the master's).
	SentinelPassword string
	// Username and Password are used where the URL has none (the only way to
	// pass credentials for a cluster).
	Username, Password string
	// TLS turns TLS on for a cluster or Sentinel (a URL says so with
	// rediss://).
	TLS bool
	// TLSCA is a PEM file of CAs to trust instead of the system roots; it
	// needs TLS to be on.
	TLSCA string
	// TLSCert and TLSKey are a client certificate and its key (PEM files),
	// for a Redis that requires one (tls-auth-clients); they need TLS.
	TLSCert, TLSKey string
	// TLSSkipHostname verifies the server's certificate chain but not that
	// it names the host dialled, for Redis nodes reached by addresses their
	// certificates do not carry (envoyproxy/ratelimit's
	// REDIS_TLS_SKIP_HOSTNAME_VERIFICATION).
	TLSSkipHostname bool
	// SentinelUsername is the Sentinels' own ACL user, beside
	// SentinelPassword.
	SentinelUsername string
	// Timeout bounds every dial, read, write and wait for a pooled
	// connection: the store must answer within -store-timeout even when Redis
	// is down. Zero means DefaultTimeout.
	Timeout time.Duration
	// PoolSize is the number of connections per node; zero means go-redis's
	// default (a few per CPU).
	PoolSize int
}

// noPipelinePool turns off go-redis's dedicated pool for pipelines, so that
// the store's calls (all pipelines) share one pool with PING: PoolSize is then
// the bound on connections, and the PING of a health check or of the start
// opens a connection that decisions use. A pipeline_pool_size in the URL
// still wins.
const noPipelinePool = -1

// NewClient builds the go-redis client that the flags describe: a
// *redis.Client for a URL, a *redis.ClusterClient for cluster seeds, a
// failover *redis.Client for Sentinels. Pass it to New; Close it on
// shutdown.
//
// The client is tuned to fail fast, because a rate limit service that waits
// for Redis stalls every request it guards: context deadlines are honoured on
// the socket (ContextTimeoutEnabled), every timeout is Timeout, a failed dial
// is not retried, and a failed command is not retried either, which also
// means a charge whose reply was lost is never run twice.
func NewClient(o ClientOptions) (redis.UniversalClient, error) {
	n := 0
	for _, set := range []bool{o.URL != "", len(o.Cluster) > 0, len(o.Sentinel) > 0} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, errors.New("redisstore: -redis-url, -redis-cluster and -redis-sentinel are mutually exclusive")
	case n == 0:
		return nil, errors.New("redisstore: one of -redis-url, -redis-cluster and -redis-sentinel is required")
	case len(o.Sentinel) > 0 && o.SentinelMaster == "":
		return nil, errors.New("redisstore: -redis-sentinel needs -redis-sentinel-master, the name the Sentinels know the master by")
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	switch {
	case o.URL != "":
		return newSingleClient(o, timeout)
	case len(o.Sentinel) > 0:
		return newFailoverClient(o, timeout)
	}
	return newClusterClient(o, timeout)
}

func newSingleClient(o ClientOptions, timeout time.Duration) (*redis.Client, error) {
	opt, err := redis.ParseURL(o.URL)
	if err != nil {
		// A *url.Error quotes the URL, password included: keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("redisstore: -redis-url: %w", err)
	}
	if opt.Username == "" && opt.Password == "" {
		opt.Username, opt.Password = o.Username, o.Password
	}
	if o.TLS && opt.TLSConfig == nil {
		host, _, _ := net.SplitHostPort(opt.Addr)
		opt.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if err := tlsExtras(opt.TLSConfig, o); err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout = orDefault(opt.DialTimeout, timeout)
	opt.ReadTimeout = orDefault(opt.ReadTimeout, timeout)
	opt.WriteTimeout = orDefault(opt.WriteTimeout, timeout)
	opt.PoolTimeout = orDefault(opt.PoolTimeout, timeout)
	if opt.MaxRetries == 0 {
		opt.MaxRetries = -1 // -1 is go-redis for "no retries"; 0 means 3.
	}
	if opt.DialerRetries == 0 {
		opt.DialerRetries = 1 // One attempt; 0 means 5, 100 ms apart.
	}
	if o.PoolSize > 0 {
		opt.PoolSize = o.PoolSize
	}
	if opt.PipelinePoolSize == 0 {
		opt.PipelinePoolSize = noPipelinePool
	}
	opt.DisableIdentity, opt.MaintNotificationsConfig = true, noMaintNotifications()
	c := redis.NewClient(opt)
	addHooks(c)
	return c, nil
}

// newFailoverClient is a client of the master that the Sentinels name,
// tuned as a single Redis is. The master is one Redis, so concurrent calls
// still share one pipeline.
func newFailoverClient(o ClientOptions, timeout time.Duration) (*redis.Client, error) {
	u, err := universalOptions(o, timeout)
	if err != nil {
		return nil, err
	}
	u.Addrs, u.MasterName, u.SentinelPassword = o.Sentinel, o.SentinelMaster, o.SentinelPassword
	u.SentinelUsername = o.SentinelUsername
	c := redis.NewFailoverClient(u.Failover())
	addHooks(c)
	return c, nil
}

// addHooks adds the hooks that every client NewClient builds carries,
// whatever its kind: a single Redis, a Sentinel's master or a cluster. The
// store reads each command's own error, never Exec's, and relies on each
// kind of client to set them alike.
func addHooks(c interface{ AddHook(redis.Hook) }) {
	c.AddHook(connErrorHook{})
}

// connErrorHook gives every command of a pipeline the error that kept the
// pipeline from running at all. go-redis returns an error reply met while
// preparing a connection (WRONGPASS or NOAUTH from the AUTH of a new
// connection) from Exec but sets it on no command, so that the store, which
// reads each command's error, would see an empty reply instead of the
// reason. A cluster client sets such an error on the commands of the node
// concerned itself (go-redis v9.23): on it the hook finds them set and does
// nothing, and it is there so that no kind of client depends on that.
type connErrorHook struct{}

var _ redis.Hook = connErrorHook{}

func (connErrorHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (connErrorHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (connErrorHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil {
			return nil
		}
		// A command that ran has its own reply or error; an error with none
		// set means that none ran.
		for _, c := range cmds {
			if c.Err() != nil {
				return err
			}
		}
		for _, c := range cmds {
			c.SetErr(err)
		}
		return err
	}
}

func newClusterClient(o ClientOptions, timeout time.Duration) (*redis.ClusterClient, error) {
	u, err := universalOptions(o, timeout)
	if err != nil {
		return nil, err
	}
	u.Addrs = o.Cluster
	// go-redis retries a cluster pipeline (MaxRedirects times) on a failed
	// dial too, sleeping a growing backoff in between: a call for the keys
	// of a dead master would wait out -store-timeout. Redirects need no
	// backoff.
	u.MinRetryBackoff, u.MaxRetryBackoff = -1, -1
	c := redis.NewClusterClient(u.Cluster())
	addHooks(c)
	return c, nil
}

// universalOptions are the settings a cluster and a Sentinel client share:
// the fail-fast tuning that NewClient describes, credentials and TLS. No
// ServerName in TLS: each node is verified against its own host name.
func universalOptions(o ClientOptions, timeout time.Duration) (*redis.UniversalOptions, error) {
	u := &redis.UniversalOptions{
		Username:              o.Username,
		Password:              o.Password,
		ContextTimeoutEnabled: true,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		MaxRetries:            -1,
		DialerRetries:         1,
		PoolSize:              o.PoolSize,
		// As for a single Redis.
		PipelinePoolSize:         noPipelinePool,
		DisableIdentity:          true,
		MaintNotificationsConfig: noMaintNotifications(),
	}
	if o.TLS {
		u.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if err := tlsExtras(u.TLSConfig, o); err != nil {
		return nil, err
	}
	return u, nil
}

// tlsExtras applies what o adds to a TLS configuration: its CAs, a client
// certificate, hostname verification off. Each needs TLS on (cfg not nil).
func tlsExtras(cfg *tls.Config, o ClientOptions) error {
	if err := addCA(cfg, o.TLSCA); err != nil {
		return err
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		if cfg == nil {
			return errors.New("redisstore: -redis-tls-cert needs TLS: use rediss:// or -redis-tls")
		}
		if o.TLSCert == "" || o.TLSKey == "" {
			return errors.New("redisstore: -redis-tls-cert and -redis-tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return fmt.Errorf("redisstore: -redis-tls-cert: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if o.TLSSkipHostname {
		if cfg == nil {
			return errors.New("redisstore: -redis-tls-skip-hostname needs TLS: use rediss:// or -redis-tls")
		}
		skipHostname(cfg)
	}
	return nil
}

// skipHostname makes cfg verify the server's chain against its roots (the
// system's when none are set) without checking the name it carries.
func skipHostname(cfg *tls.Config) {
	roots := cfg.RootCAs
	cfg.InsecureSkipVerify = true
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("redisstore: the Redis server sent no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, b := range raw {
			c, err := x509.ParseCertificate(b)
			if err != nil {
				return fmt.Errorf("redisstore: the Redis server's certificate: %w", err)
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}

// addCA makes cfg trust only the CAs in the PEM file path, if one is given.
func addCA(cfg *tls.Config, path string) error {
	if path == "" {
		return nil
	}
	if cfg == nil {
		return errors.New("redisstore: -redis-tls-ca needs TLS: use rediss:// or -redis-tls")
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("redisstore: -redis-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("redisstore: -redis-tls-ca: no PEM certificate in %s", path)
	}
	cfg.RootCAs = pool
	return nil
}

// noMaintNotifications turns off go-redis's CLIENT MAINT_NOTIFICATIONS
// handshake, as DisableIdentity does its CLIENT SETINFO: each is a round
// trip more before a new connection's first command, within the deadline
// of the call that needed the connection, and a Redis 20 ms away then
// cannot open one within -store-timeout (a timed-out handshake closes the
// connection, and the next call starts over).
func noMaintNotifications() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
