package session

// SetBeforeListen makes f run as each subscriptions/listen of s is about
// to take its lock; it must be set before the listen is sent.
func SetBeforeListen(s *Session, f func()) { s.beforeListen = f }

// Drained reports whether the drain of s has ended its subscriptions and
// no longer takes new tasks.
func Drained(s *Session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Pending is the number of requests s holds in flight: running, waiting
// for a slot, or ended with an answer not yet queued.
func Pending(s *Session) int { return s.inFlight() }
