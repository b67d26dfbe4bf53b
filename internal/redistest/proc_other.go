//go:build !linux

package redistest

import "syscall"

// sysProcAttr has nothing to add outside Linux: a server may then outlive a
// test binary that is killed before its cleanups run.
func sysProcAttr() *syscall.SysProcAttr { return nil }
