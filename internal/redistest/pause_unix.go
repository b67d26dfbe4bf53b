//go:build unix

package redistest

import "syscall"

// Pause stops the server's process (SIGSTOP) without ending it: the kernel
// still accepts connections on its port, and nothing answers them, as with
// a host that hangs. Resume continues it; Stop ends it either way. Pausing
// a stopped server does nothing.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v to redis-server on port %d: %v", sig, s.port, err)
	}
}
