package watch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/watch"
)

func Example() {
	dir, err := os.MkdirTemp("", "limits")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "limits.yaml")
	if err := os.WriteFile(path, []byte("domain: a\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}

	w, err := watch.New(zap.NewNop(), watch.Options{}, path)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	changed := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() {
			// A real caller reloads here, keeping the old config if the
			// new one is invalid. A touch, or a save of the same bytes,
			// does not call.
			select {
			case changed <- struct{}{}:
			default:
			}
		})
	}()

	if err := os.WriteFile(path, []byte("domain: b\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	select {
	case <-changed:
		fmt.Println("limits changed")
	case <-ctx.Done():
		fmt.Println("timed out")
	}
	cancel()
	<-done
	// Output: limits changed
}
