//go:build !unix

package redistest

// Pause fails the test: pausing a process needs SIGSTOP.
func (s *Server) Pause() {
	s.t.Helper()
	s.t.Fatal("redistest: Pause needs a Unix system")
}

// Resume fails the test, as Pause does.
func (s *Server) Resume() { s.Pause() }
