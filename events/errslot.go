package events

import "sync/atomic"

// errSlot holds why something is refused, nil while it is not, for
// goroutines that set and read it without a lock. Not an atomic.Value:
// that panics on storing nil, and on storing an error of another concrete
// type than the first, and either happened at the first recovery from a
// failed commit.
type errSlot struct{ p atomic.Pointer[error] }

// get returns the error held, or nil.
func (s *errSlot) get() error {
	if p := s.p.Load(); p != nil {
		return *p
	}
	return nil
}

// set holds err, or with nil clears the slot. Clearing a clear slot
// writes nothing, so the readers on other cores keep their cached copy.
func (s *errSlot) set(err error) {
	if err == nil {
		if s.p.Load() != nil {
			s.p.Store(nil)
		}
		return
	}
	s.p.Store(&err)
}
