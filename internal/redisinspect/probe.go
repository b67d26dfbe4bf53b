package redisinspect

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// probe sends, in one pipeline, the commands of Options.Probe and the
// markers' SET … NX GET, which it returns; each rule Redis refuses with
// NOPERM goes in found.Missing. Other errors (out of memory, a timeout)
// are no missing permission: the memory check and health say those.
func (in *Inspector) probe(ctx context.Context, found *Inspection) []markerRead {
	p := in.client.Pipeline()
	var cmds []redis.Cmder
	if in.probeCmds != nil {
		for _, args := range in.probeCmds() {
			cmds = append(cmds, p.Do(ctx, args...))
		}
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	in.token = base64.RawURLEncoding.EncodeToString(b[:])
	var markers []markerRead
	for key, master := range in.markerKeys(ctx) {
		// The service's own, not the limits': a marker refused turns the
		// lost-data check off (lostData says it), not the store.
		m := markerRead{key: key, master: master, cmd: redis.NewStringCmd(ctx, "set", key, in.token, "nx", "get")}
		_ = p.Process(ctx, m.cmd)
		markers = append(markers, m)
	}
	_, _ = p.Exec(ctx) // each command's error is read below
	for _, c := range cmds {
		if rule := in.missingRule(c.Err()); rule != "" && !slices.Contains(found.Missing, rule) {
			found.Missing = append(found.Missing, rule)
		}
	}
	return markers
}

// missingRule is the ACL rule whose absence err, a NOPERM, reports: +cmd,
// ~prefix*, &channel; "" for any other error.
func (in *Inspector) missingRule(err error) string {
	if err == nil || !redis.HasErrorPrefix(err, "NOPERM") {
		return ""
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "to run the '"):
		_, name, _ := strings.Cut(msg, "to run the '")
		name, _, _ = strings.Cut(name, "'")
		return "+" + strings.ToLower(name)
	case strings.Contains(msg, "channel"):
		return "&" + in.channel
	case strings.Contains(msg, "key"):
		return "~" + in.prefix + "*"
	}
	return "(" + msg + ")"
}
