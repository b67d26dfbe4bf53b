// Package memtest measures memory for tests and their reports.
package memtest

import "runtime"

// HeapAfterGC is the heap in use after two collections (the second frees
// what the first's finalizers let go): the live heap, and the spans it
// holds.
func HeapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
