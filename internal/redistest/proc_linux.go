package redistest

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the test binary dies
// without running its cleanups (a go test timeout, a SIGKILL), so that no
// server outlives its test. The signal follows the OS thread that started
// the process; the Go runtime only retires threads that a goroutine locked
// and never unlocked, which tests here do not do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
