package server

import (
	"fmt"
	"net"
	"strings"

	"go.uber.org/zap"
)

// listeners are the server's sockets. They are opened first, so that a
// test can ask for port 0 and learn the ports before serveOn runs.
type listeners struct {
	grpc, http net.Listener
	debug      net.Listener // nil when pprof is off
	stats      net.Listener // nil when envoyproxy/ratelimit's stats are off (stats.go)
	admin      net.Listener // nil without -admin-addr (admin.go)
}

func listen(o *Options, log *zap.Logger) (*listeners, error) {
	ls := &listeners{}
	var err error
	if ls.grpc, err = net.Listen(grpcNetwork(o.grpcAddr)); err != nil {
		return nil, fmt.Errorf("-grpc-addr: %w", err)
	}
	if ls.http, err = net.Listen("tcp", o.httpAddr); err != nil {
		ls.grpc.Close()
		return nil, fmt.Errorf("-http-addr: %w", err)
	}
	if o.debugAddr != "" {
		if ls.debug, err = net.Listen("tcp", o.debugAddr); err != nil {
			log.Warn("pprof is off: cannot listen", zap.String("addr", o.debugAddr), zap.Error(err))
			ls.debug = nil
		}
	}
	if ls.stats, err = listenStats(o, log); err != nil {
		ls.close()
		return nil, err
	}
	if ls.admin, err = listenAdmin(o); err != nil {
		ls.close()
		return nil, err
	}
	return ls, nil
}

// close closes every listener; closing one that a server already closed
// does nothing.
func (ls *listeners) close() {
	for _, l := range []net.Listener{ls.grpc, ls.http, ls.debug, ls.stats, ls.admin} {
		if l != nil {
			l.Close()
		}
	}
}

// grpcNetwork splits -grpc-addr into the network and address net.Listen
// takes: unix:PATH is a unix socket (envoyproxy/ratelimit's GRPC_UDS),
// anything else a TCP address.
func grpcNetwork(addr string) (network, address string) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return "unix", path
	}
	return "tcp", addr
}
