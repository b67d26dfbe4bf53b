package explain

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/httpapi"
	"github.com/envoy-rls/envoy-rls/internal/topk"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// TestTopCommand asks the admin endpoints, served on a loopback listener,
// with the server's token file, and prints the rules and descriptors
// refused most; without the token it fails with the server's 401.
func TestTopCommand(t *testing.T) {
	const token = "ops-0123456789abcdef"
	tokens, err := httpapi.ParseTokens([]byte("ops " + token))
	if err != nil {
		t.Fatal(err)
	}
	board := topk.NewBoard(topk.BoardOptions{})
	now := time.Now()
	for range 3 {
		board.Add(now, "edge", "per_ip", []descriptors.Entry{{Key: "remote_address", Value: "10.0.0.1"}})
	}
	board.Add(now, "edge", "per_ip", []descriptors.Entry{{Key: "remote_address", Value: "10.0.0.2"}})
	srv := httptest.NewServer(httpapi.AdminHandler(httpapi.AdminOptions{Board: board, Log: zap.NewNop(), Tokens: func() *httpapi.Tokens { return tokens }}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("# the server's file\nops "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := TopCommand([]string{"-addr", srv.URL, "-admin-token-file", path}, noEnv, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"edge / per_ip: 4 refused in the last 60 to 80 s", "3         0  remote_address=10.0.0.1", "1         0  remote_address=10.0.0.2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	errOut.Reset()
	if code := TopCommand([]string{"-addr", srv.URL}, noEnv, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "401") {
		t.Errorf("without a token: exit %d, %q; want 1 and the 401", code, errOut.String())
	}
}

func noEnv(string) (string, bool) { return "", false }
