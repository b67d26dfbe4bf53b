//go:build !linux

package integration

import "syscall"

// sysProcAttr has nothing to add where there is no parent-death signal.
func sysProcAttr() *syscall.SysProcAttr { return nil }
