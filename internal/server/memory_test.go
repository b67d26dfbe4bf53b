package server

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// residentHeap is the heap the process holds from the system.
func residentHeap() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapSys - ms.HeapReleased)
}

// manyLimits is a limits file of domain test with n descriptors.
func manyLimits(n int) string {
	var b strings.Builder
	b.WriteString("domain: test\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: k%d\n    value: v%d\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", i/100, i%100, 1+i%1000)
	}
	return b.String()
}

// TestReloadGivesMemoryBack: once a small config replaces a large one,
// the memory the large one's load took goes back to the system within
// seconds (a wide bound: it takes one collection), rather than over
// minutes. Not parallel: it measures the process.
func TestReloadGivesMemoryBack(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := serveDir(t, dir, zap.NewNop())
	checkConfigInForce(t, addr, "1", "config: 1 domain")
	large := manyLimits(20_000)
	debug.FreeOSMemory()
	base := residentHeap()
	if err := os.WriteFile(file, []byte(large), 0o644); err != nil {
		t.Fatal(err)
	}
	// Loading 20,000 limits takes seconds under the race detector: the
	// bound is wide, since what is checked is the memory after it.
	eventuallyWithin(t, time.Minute, "the large config in force", func() bool {
		_, body := httpDo(t, "GET", "http://"+addr+"/metrics", "")
		return strings.Contains(body, "\nrls_config_limits 20000\n")
	})
	loaded := residentHeap() - base
	if err := os.WriteFile(file, []byte(serveLimits), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the small config in force", func() bool {
		_, body := httpDo(t, "GET", "http://"+addr+"/metrics", "")
		return strings.Contains(body, "\nrls_config_limits 1\n")
	})
	// The bound: 8 times the file, for what the rest of the process
	// allocates meanwhile, against 70 times the file that the load leaves
	// resident without being handed back.
	bound := 8 * int64(len(large))
	deadline := time.Now().Add(5 * time.Second)
	after := residentHeap() - base
	for after > bound && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		after = residentHeap() - base
	}
	t.Logf("a config of %d bytes: %d bytes of heap resident with it, %d once a small one replaced it", len(large), loaded, after)
	if after > bound {
		t.Errorf("5 s after a small config replaced one of %d bytes, the heap holds %d bytes more than before it from the system, want under %d", len(large), after, bound)
	}
}

// The bytes held by /json bodies are exported, and go back to 0 once a
// body is decoded.
func TestJSONBodyBytesExported(t *testing.T) {
	s := startInProcess(t)
	if code, body := s.postJSON(t, jsonRequest("a", "")); code != 200 {
		t.Fatalf("POST /json: got %d %q, want 200", code, body)
	}
	if _, body := httpDo(t, "GET", "http://"+s.httpAddr+"/metrics", ""); !strings.Contains(body, "\nrls_json_body_bytes 0\n") {
		t.Errorf("/metrics: no rls_json_body_bytes 0 after a /json request")
	}
}
