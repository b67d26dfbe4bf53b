package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/server"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs"
)

// quota is `envoy-rls explain -rlqs`: an RLQS bucket id explained from the
// shared store (as the server would divide it), or by a running server.
type quota struct {
	on        bool
	addr      string
	tokenFile string
}

func quotaFlags(cl *cli.CommandLine) *quota {
	q := &quota{}
	cl.FS.BoolVar(&q.on, "rlqs", false, "explain an RLQS bucket id (entries in any order, each key once) and its division among the Envoys, rather than an RLS descriptor")
	cl.FS.StringVar(&q.addr, "addr", "", "with -rlqs: ask the running server's GET /rlqs at this URL (its -http-addr, or its -admin-addr) instead of reading the store")
	cl.FS.StringVar(&q.tokenFile, "admin-token-file", "", "with -addr: the server's token file, or a file holding one token")
	return q
}

// command explains the bucket id of args, DOMAIN key=value...
func (q *quota) command(cl *cli.CommandLine, o *server.Options, args []string, asJSON bool, stdout, stderr io.Writer) int {
	domain, entries, err := bucketID(args)
	if err == nil && q.addr == "" {
		err = o.CheckStore()
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	if q.addr != "" {
		return q.ask(domain, entries, asJSON, stdout, stderr)
	}
	cfg, err := o.LoadConfig()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	svc, closeStore, err := o.NewRLQS(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain:", err)
		return 1
	}
	defer closeStore() //nolint:errcheck // closing at exit
	b, err := svc.Explain(context.Background(), domain, entries)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain:", err)
		return 1
	}
	note := ""
	if b.Store == "embedded" && (b.Outcome == rlqs.OutcomeDivided || b.Outcome == rlqs.OutcomeShadow) {
		note = "the demands live in the server's process (the embedded store): this command has none of them.\n" +
			"Ask the server: envoy-rls explain -rlqs -addr http://HOST:PORT " + strings.Join(args, " ") + "\n" +
			"(its GET /rlqs, on -http-addr with -admin-token-file, or on -admin-addr)"
	}
	if asJSON {
		writeBucketJSON(stdout, b)
		if note != "" {
			fmt.Fprintln(stderr, note)
		}
		return 0
	}
	fmt.Fprintf(stdout, "store:      %s\n", o.StoreDescription())
	b.WriteText(stdout) //nolint:errcheck // nothing to do about a closed stdout
	if note != "" {
		fmt.Fprintln(stdout, "note:       "+strings.ReplaceAll(note, "\n", "\n            "))
	}
	return 0
}

// ask has the server at q.addr explain the bucket.
func (q *quota) ask(domain string, entries []descriptors.Entry, asJSON bool, stdout, stderr io.Writer) int {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = url.QueryEscape(e.Key) + "=" + url.QueryEscape(e.Value)
	}
	body, err := askAdmin(q.addr, "/rlqs?format=json&domain="+url.QueryEscape(domain)+"&bucket="+strings.Join(parts, ","), q.tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain:", err)
		return 1
	}
	var b rlqs.Bucket
	if err := json.Unmarshal(body, &b); err != nil {
		fmt.Fprintln(stderr, "envoy-rls explain: the answer is not a bucket:", err)
		return 1
	}
	if asJSON {
		writeBucketJSON(stdout, b)
		return 0
	}
	fmt.Fprintf(stdout, "server:     %s\n", q.addr)
	b.WriteText(stdout) //nolint:errcheck // nothing to do about a closed stdout
	return 0
}

func writeBucketJSON(w io.Writer, b rlqs.Bucket) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(b) //nolint:errcheck // nothing to do about a closed stdout
}

// bucketID reads DOMAIN key=value...: a bucket id is a map, so a key may
// come once.
func bucketID(args []string) (string, []descriptors.Entry, error) {
	if len(args) < 2 {
		return "", nil, fmt.Errorf("want DOMAIN and at least one key=value, got %d arguments", len(args))
	}
	seen := map[string]bool{}
	var entries []descriptors.Entry
	for _, a := range args[1:] {
		e, err := parseEntry(a)
		if err != nil {
			return "", nil, err
		}
		if seen[e.Key] {
			return "", nil, fmt.Errorf("key %q given twice: a bucket id is a map, one value a key", e.Key)
		}
		seen[e.Key] = true
		entries = append(entries, e)
	}
	return args[0], entries, nil
}
