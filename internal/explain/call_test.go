package explain

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/internal/servertest"
)

const opsToken = "ops-0123456789abcdef"

// eachStore runs f against a server on the embedded store and one on a
// real Redis, started with args.
func eachStore(t *testing.T, f func(t *testing.T, args ...string)) {
	t.Run("embedded", func(t *testing.T) { f(t) })
	t.Run("redis", func(t *testing.T) { f(t, "-redis-url", redistest.Start(t).URL()) })
}

// runCommand runs a command with args and no environment.
func runCommand(command func([]string, func(string) (string, bool), io.Writer, io.Writer) int, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := command(args, noEnv, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCallCommand sends real decisions to a running server: OK is exit 0
// with the status's limit and remaining, OVER_LIMIT exit 3, a refund
// gives the hit back, a + starts a second descriptor, the answer's
// headers are printed; a server that is not there is exit 1.
func TestCallCommand(t *testing.T) {
	eachStore(t, func(t *testing.T, store ...string) {
		s := servertest.Start(t, serveLimits, append(store, "-response-headers")...)
		call := func(args ...string) (int, string, string) {
			return runCommand(CallCommand, append([]string{"-addr", s.GRPCAddr, "-domain", "test"}, args...)...)
		}
		for i, want := range []struct {
			code int
			out  string
		}{
			{CallOK, "overall: OK\n[0] k=a: OK, limit one 1 per hour, remaining 0, reset "},
			{CallOverLimit, "overall: OVER_LIMIT\n[0] k=a: OVER_LIMIT, limit one 1 per hour, remaining 0, reset "},
		} {
			code, out, errOut := call("k=a")
			if code != want.code || !strings.HasPrefix(out, want.out) {
				t.Fatalf("call %d: exit %d, stdout %q, stderr %q; want %d and a start of %q", i, code, out, errOut, want.code, want.out)
			}
			if !strings.Contains(out, "response header: RateLimit-Policy: ") {
				t.Errorf("call %d: no RateLimit-Policy header printed:\n%s", i, out)
			}
		}
		for _, refund := range [][]string{{"-refund"}, {"-hits", "-1"}} {
			if code, out, errOut := call(append(refund, "k=a")...); code != CallOK {
				t.Fatalf("%q: exit %d, %q %q", refund, code, out, errOut)
			}
			if code, out, _ := call("k=a"); code != CallOK {
				t.Fatalf("after %q: exit %d, %q; want the hit given back", refund, code, out)
			}
		}
		code, out, _ := call("k=b", "+", "k=c", "other=x")
		if code != CallOK || !strings.Contains(out, "[0] k=b: OK, limit one") || !strings.Contains(out, "[1] k=c other=x: OK, no limit") {
			t.Errorf("two descriptors: exit %d:\n%s", code, out)
		}
		if code, out, _ := call("-hits", "0", "k=b"); code != CallOverLimit {
			t.Errorf("-hits 0 (a peek) of a used key: exit %d, %q; want %d", code, out, CallOverLimit)
		}
	})
	for _, args := range [][]string{{"k=a"}, {"-domain", "test"}, {"-domain", "test", "+", "k=a"}, {"-domain", "test", "k=a", "+"}, {"-domain", "test", "k"}} {
		if code, _, errOut := runCommand(CallCommand, args...); code != 2 || !strings.Contains(errOut, "usage: envoy-rls call") {
			t.Errorf("%q: exit %d, %q; want a usage error", args, code, errOut)
		}
	}
	if code, _, errOut := runCommand(CallCommand, "-addr", "127.0.0.1:1", "-domain", "test", "k=a"); code != CallError || errOut == "" {
		t.Errorf("no server: exit %d, %q; want %d and why", code, errOut, CallError)
	}
}

// TestCallTLS: a server with -grpc-tls-cert is called with -tls-ca, and
// one that requires a client certificate with -tls-cert and -tls-key.
func TestCallTLS(t *testing.T) {
	ca := redistest.NewCA(t)
	cert, key := ca.Issue(t, "envoy-rls")
	client, clientKey := ca.Issue(t, "client")
	s := servertest.Start(t, serveLimits, "-grpc-tls-cert", cert, "-grpc-tls-key", key, "-grpc-tls-client-ca", ca.File)
	base := []string{"-addr", s.GRPCAddr, "-domain", "test", "-tls-ca", ca.File}
	if code, out, errOut := runCommand(CallCommand, append(base, "-tls-cert", client, "-tls-key", clientKey, "k=a")...); code != CallOK {
		t.Errorf("mutual TLS: exit %d, %q %q", code, out, errOut)
	}
	if code, _, _ := runCommand(CallCommand, append(base, "k=a")...); code != CallError {
		t.Errorf("without the client certificate: exit %d, want %d", code, CallError)
	}
}

// TestResetCommand clears a refused key on a running server with its
// token file, so that the next call is OK; without the token it fails
// with the server's 401, and a descriptor no limit counts with its 404.
func TestResetCommand(t *testing.T) {
	eachStore(t, func(t *testing.T, store ...string) {
		tokens := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(tokens, []byte("ops "+opsToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := servertest.Start(t, serveLimits, append(store, "-admin-token-file", tokens)...)
		call := []string{"-addr", s.GRPCAddr, "-domain", "test", "k=a"}
		runCommand(CallCommand, call...)
		if code, _, _ := runCommand(CallCommand, call...); code != CallOverLimit {
			t.Fatalf("second call: exit %d, want %d", code, CallOverLimit)
		}
		reset := []string{"-addr", "http://" + s.HTTPAddr, "-domain", "test"}
		if code, _, errOut := runCommand(ResetCommand, append(reset, "k=a")...); code != 1 || !strings.Contains(errOut, "401") {
			t.Errorf("without a token: exit %d, %q; want 1 and the 401", code, errOut)
		}
		code, out, errOut := runCommand(ResetCommand, append(reset, "-admin-token-file", tokens, "k=a")...)
		if code != 0 || !strings.Contains(out, "cleared in test") || !strings.Contains(out, "one (fixed_window)") {
			t.Fatalf("reset: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if code, out, _ := runCommand(CallCommand, call...); code != CallOK {
			t.Errorf("after the reset: exit %d, %q; want OK", code, out)
		}
		if code, _, errOut := runCommand(ResetCommand, append(reset, "-admin-token-file", tokens, "other=x")...); code != 1 || !strings.Contains(errOut, "404") {
			t.Errorf("a descriptor no limit counts: exit %d, %q; want 1 and the 404", code, errOut)
		}
	})
	if code, _, errOut := runCommand(ResetCommand, "k=a"); code != 2 || !strings.Contains(errOut, "-domain is required") {
		t.Errorf("no -domain: exit %d, %q", code, errOut)
	}
}
