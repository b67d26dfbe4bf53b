package integration

import "syscall"

// sysProcAttr makes the kernel kill the service when the test binary dies
// without running its cleanups (a go test timeout, a SIGKILL), so that no
// envoy-rls outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
