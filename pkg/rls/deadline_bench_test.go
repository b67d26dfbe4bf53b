package rls

import (
	"context"
	"testing"
	"time"
)

// BenchmarkStoreDeadline compares what bounding one store call costs: a
// timer of its own (context.WithTimeout and its cancel) against the context
// shared by the calls of a tick (storeDeadlines), with callers on every CPU.
func BenchmarkStoreDeadline(b *testing.B) {
	const timeout = 50 * time.Millisecond
	b.Run("own-timer", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				_ = ctx.Err()
				cancel()
			}
		})
	})
	b.Run("shared", func(b *testing.B) {
		d := newStoreDeadlines(timeout)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = d.context(time.Now()).Err()
			}
		})
	})
}
