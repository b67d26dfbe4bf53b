package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/cli"
	"github.com/envoy-rls/envoy-rls/internal/topk"
)

// TopArgs is the usage of `envoy-rls top` after its name.
const TopArgs = "[-addr URL] [-admin-token-file PATH] [-n N] [-json]"

const topAbout = `Asks a running server's GET /top which descriptors its limits refused most
in the last minute, per rule, and prints them with their counts: each an
upper bound, less its error a lower bound (the sketch's bound). Each
instance answers for itself: sum a descriptor's counts over the instances
for the whole service (an upper bound too). -admin-token-file is the
server's (its RLS_ADMIN_TOKEN_FILE applies): the first token in it is sent.
Exit 0 when answered, 1 when the server cannot be asked or refuses, 2 on a
usage error.
`

// topTimeout bounds the call to the server.
const topTimeout = 10 * time.Second

// TopCommand is `envoy-rls top`.
func TopCommand(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	cl := cli.New("envoy-rls top", TopArgs, topAbout)
	cl.Env = true
	cl.NoEnv = map[string]bool{"addr": true, "n": true, "json": true} // the server's twins only
	addr := cl.FS.String("addr", "http://127.0.0.1:8080", "the server's admin endpoints: its -http-addr, or its -admin-addr")
	tokenFile := cl.FS.String("admin-token-file", "", "the server's token file, or a file holding one token")
	n := cl.FS.Int("n", 10, "descriptors per rule, the most refused first")
	asJSON := cl.FS.Bool("json", false, "print the server's JSON answer")
	rest, err := cl.Parse(args, lookupEnv)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected argument %q", rest[0])
	}
	if err != nil {
		return cl.Failed(err, stdout, stderr)
	}
	body, err := askTop(*addr, *tokenFile, *n)
	return printAnswer(cl, body, err, *asJSON, "a report", writeTop, stdout, stderr)
}

// printAnswer prints an admin endpoint's answer body to the call of
// command cl, or err: as it came with asJSON, else decoded into a T
// (what names it) and written by write. It returns the command's exit
// status: 0 when printed, 1 for err or an answer that is no T.
func printAnswer[T any](cl *cli.CommandLine, body []byte, err error, asJSON bool, what string, write func(io.Writer, T), stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cl.Name(), err)
		return 1
	}
	if asJSON {
		stdout.Write(body) //nolint:errcheck // nothing to do about a closed stdout
		return 0
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		fmt.Fprintf(stderr, "%s: the answer is not %s: %v\n", cl.Name(), what, err)
		return 1
	}
	write(stdout, v)
	return 0
}

// askTop calls GET /top at addr with the first token of tokenFile.
func askTop(addr, tokenFile string, n int) ([]byte, error) {
	return askAdmin(addr, "/top?n="+strconv.Itoa(n), tokenFile)
}

// askAdmin calls GET pathQuery on the admin endpoints at addr with the
// first token of tokenFile, and returns the body of a 200.
func askAdmin(addr, pathQuery, tokenFile string) ([]byte, error) {
	return callAdmin(http.MethodGet, addr, pathQuery, tokenFile, nil)
}

// callAdmin calls method pathQuery on the admin endpoints at addr with
// the first token of tokenFile and, when body is not nil, body as JSON,
// and returns the body of a 200.
func callAdmin(method, addr, pathQuery, tokenFile string, body []byte) ([]byte, error) {
	u, err := url.Parse(strings.TrimSuffix(addr, "/") + pathQuery)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("-addr %q: want a URL such as http://127.0.0.1:8080", addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), topTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tokenFile != "" {
		tok, err := firstToken(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("-admin-token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, u.Redacted(), resp.Status, strings.TrimSpace(string(answer)))
	}
	return answer, nil
}

// firstToken is the first token of a token file: the last word of its
// first line that is neither blank nor a comment.
func firstToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			return f[len(f)-1], nil
		}
	}
	return "", errors.New("no token in the file")
}

// writeTop prints a report, one block per rule.
func writeTop(w io.Writer, rep topk.Report) {
	span := fmt.Sprintf("the last %g to %g s", rep.SpanSeconds-rep.SliceSeconds, rep.SpanSeconds)
	if len(rep.Rules) == 0 {
		fmt.Fprintf(w, "nothing refused in %s\n", span)
	}
	for i, r := range rep.Rules {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s / %s: %d refused in %s (each count at most %d over)\n", r.Domain, r.Rule, r.Refused, span, r.ErrorBound)
		fmt.Fprintf(w, "  %10s  %8s  %s\n", "REFUSED", "±", "DESCRIPTOR")
		for _, k := range r.Top {
			fmt.Fprintf(w, "  %10d  %8d  %s\n", k.Count, k.Error, k.Descriptor)
		}
	}
	if rep.Untracked > 0 {
		fmt.Fprintf(w, "\n%d refusals of rules past the board's bound were not counted by descriptor\n", rep.Untracked)
	}
}
