package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccuracyFilesRepeat runs `rls-bench accuracy` twice on one seed, with
// different numbers of workers: the tables and charts are the same bytes.
func TestAccuracyFilesRepeat(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	for i, workers := range []string{"1", "3"} {
		var out bytes.Buffer
		args := []string{"accuracy", "-seed", "9", "-sources", "20", "-duration", "3m", "-workers", workers, "-out", dirs[i]}
		if err := realMain(context.Background(), args, &out, &out); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		if !strings.Contains(out.String(), "peak memory") {
			t.Errorf("output %q: no time and memory", out.String())
		}
	}
	names, err := os.ReadDir(dirs[0])
	if err != nil || len(names) != 4 {
		t.Fatalf("files written: %v, %v; want 4", names, err)
	}
	for _, n := range names {
		a, errA := os.ReadFile(filepath.Join(dirs[0], n.Name()))
		b, errB := os.ReadFile(filepath.Join(dirs[1], n.Name()))
		if errA != nil || errB != nil || !bytes.Equal(a, b) || len(a) == 0 {
			t.Errorf("%s differs between two runs of one seed (%v, %v)", n.Name(), errA, errB)
		}
	}
}

func TestAccuracyUsage(t *testing.T) {
	for _, args := range [][]string{
		{"accuracy"},
		{"accuracy", "-out", "/nonexistent/dir"},
		{"accuracy", "-out", t.TempDir(), "-sources", "0"},
		{"accuracy", "-out", t.TempDir(), "extra"},
		{"accuracy", "-out", t.TempDir(), "-hotkey"}, // the mode needs a Redis
	} {
		var out bytes.Buffer
		if err := realMain(context.Background(), args, &out, &out); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
