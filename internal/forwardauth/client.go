package forwardauth

import (
	"net/http"
	"net/netip"
	"strings"
)

// Client is the forwarded request's client address, and whether the call
// carried forwarding headers that were ignored because its peer is not a
// trusted proxy (a spoof, or a proxy missing from trusted_proxies).
//
// From a trusted peer, the client is the rightmost address of
// X-Forwarded-For that is not itself a trusted proxy: each proxy appends
// the address it saw, so the addresses left of the last untrusted one
// were written by the client and prove nothing. With every address
// trusted, the leftmost; without X-Forwarded-For, X-Real-IP; without
// either, the peer. From any other peer, the peer, whatever it sends.
func (c *Config) Client(remoteAddr string, h http.Header) (addr netip.Addr, ignored bool, _ *Refusal) {
	peer, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		// Not an IP socket (a unix socket): no address to key on.
		return netip.Addr{}, false, nil
	}
	addr = peer.Addr().Unmap()
	xff := h.Values("X-Forwarded-For")
	realIP := h.Get("X-Real-Ip")
	if !c.trusts(addr) {
		return addr, len(xff) > 0 || realIP != "", nil
	}
	if len(xff) == 0 {
		if realIP == "" {
			return addr, false, nil
		}
		a, err := netip.ParseAddr(strings.TrimSpace(realIP))
		if err != nil {
			return netip.Addr{}, false, refuse(http.StatusBadRequest, OutcomeBadForwardedFor, "X-Real-IP from a trusted proxy is not an address: %q", clip(realIP))
		}
		return a.Unmap(), false, nil
	}
	hops := strings.Split(strings.Join(xff, ","), ",")
	var leftmost netip.Addr
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return netip.Addr{}, false, refuse(http.StatusBadRequest, OutcomeBadForwardedFor, "X-Forwarded-For from a trusted proxy has %q, not an address, before any untrusted one", clip(hops[i]))
		}
		a = a.Unmap()
		if !c.trusts(a) {
			return a, false, nil
		}
		leftmost = a
	}
	return leftmost, false, nil
}

func (c *Config) trusts(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clip shortens a value quoted in a reason.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
