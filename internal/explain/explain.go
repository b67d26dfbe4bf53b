// Package explain is `envoy-rls explain`: for one descriptor of a domain,
// which node of the limits each entry matches, the limits that apply, the
// store key of each and its current state, read with a peek. The service
// it asks is built as the server builds its own (package server), so that
// what it shows is what the server does. It is also the commands that ask
// a running server: `envoy-rls top` (top.go), which descriptors its limits
// refuse most; `envoy-rls reset` (reset.go), a descriptor's limits
// cleared; `envoy-rls call` (call.go), one ShouldRateLimit, as Envoy
// sends it.
package explain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/server"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// CommandArgs is the usage of `envoy-rls explain` after its name.
const CommandArgs = "[flags] [-rlqs [-addr URL]] DOMAIN key=value [key=value...]"

const about = `Loads the limits as the server does and tells, for one descriptor of DOMAIN,
which node of the config each entry matches (exact value, wildcard, bare
key, none), the limits that apply, the store key of each and its current
state, read with a peek (nothing is consumed). Without -redis-url or
-redis-cluster the store is this process's own, so the state is empty.
The server's RLS_* environment variables apply, so that run next to the
server it reads the same config and keys. Flags may come before or after
the arguments; after -- everything is an entry. Exit 0 when explained, 1
when the config does not load or the store cannot be read, 2 on a usage
error.

With -rlqs the entries are an RLQS bucket id (in any order, each key
once): it tells the rule the id matches, the limit's rate, the bucket's
key and, read from the Redis the servers share (nothing is written), each
live client (an Envoy's stream), its demand, its max-min fair share, the
token bucket it is sent, and the total against the limit. On the embedded
store the demands live in each server's process: ask the server itself
with -addr, its admin endpoints' URL (GET /rlqs, on -http-addr with
-admin-token-file, or on -admin-addr), which answers from its own
streams and, with Redis, every instance's.
`

// Command is `envoy-rls explain`, reading the server's RLS_ twins through
// lookupEnv.
func Command(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	cl := cli.New("envoy-rls explain", CommandArgs, about)
	cl.Env = true
	// The server has no -json and no -addr, and its -rlqs (serve RLQS)
	// is not explain's.
	cl.NoEnv = map[string]bool{"json": true, "rlqs": true, "addr": true}
	o := server.ExplainFlags(cl.FS)
	asJSON := cl.FS.Bool("json", false, "print the explanation as JSON")
	q := quotaFlags(cl)
	rest, err := cl.Parse(args, lookupEnv)
	if err == nil && q.addr != "" && !q.on {
		err = errors.New("-addr asks a server about an RLQS bucket: give -rlqs too")
	}
	if err == nil && q.on {
		return q.command(cl, o, rest, *asJSON, stdout, stderr)
	}
	var domain string
	var entries []descriptors.Entry
	if err == nil {
		domain, entries, err = request(o, rest)
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	cfg, err := o.LoadConfig()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	svc, closeStore, err := o.NewService(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain:", err)
		return 1
	}
	defer closeStore() //nolint:errcheck // closing at exit
	ex, err := svc.Explain(context.Background(), domain, entries)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain:", err)
		return 2
	}
	write(stdout, ex, o, *asJSON)
	for _, l := range ex.Limits {
		if l.State != nil && l.State.Error != "" {
			return 1
		}
	}
	return 0
}

// write prints the explanation as text, or as JSON.
func write(w io.Writer, ex rls.Explanation, o *server.Options, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(ex) //nolint:errcheck // nothing to do about a closed stdout
		return
	}
	fmt.Fprintf(w, "store:      %s\n", o.StoreDescription())
	ex.WriteText(w) //nolint:errcheck // nothing to do about a closed stdout
}

// request checks explain's flags and reads its arguments: the domain and
// the descriptor's entries.
func request(o *server.Options, args []string) (string, []descriptors.Entry, error) {
	if len(args) < 2 {
		return "", nil, fmt.Errorf("want DOMAIN and at least one key=value, got %d arguments", len(args))
	}
	if err := o.CheckStore(); err != nil {
		return "", nil, err
	}
	var entries []descriptors.Entry
	for _, a := range args[1:] {
		e, err := parseEntry(a)
		if err != nil {
			return "", nil, err
		}
		entries = append(entries, e)
	}
	return args[0], entries, nil
}
