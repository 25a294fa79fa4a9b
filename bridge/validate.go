package bridge

import "runtime"

// validateQueueMax bounds the frames waiting for a validation worker, over
// all connections. A reader that finds it full waits: back-pressure again.
const validateQueueMax = 4096 // frames

// alreadyValidated is the closed channel of every frame validated on its
// reader, which then needs no channel of its own.
var alreadyValidated = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// validateAsync validates it on the calling goroutine (the connection's
// reader) and hands it to the validation workers only if its signature is
// to be checked: that check, tens of microseconds, is the one step worth a
// trip to another goroutine; the rest costs a few microseconds and each
// hand-off adds a wait for a core. The workers, one per core, check frames
// of all connections alike; each connection's sequencer restores the
// arrival order.
func (s *Server) validateAsync(it *item) {
	if !s.validate(it) {
		it.validated = alreadyValidated
		return
	}
	it.validated = make(chan struct{})
	s.workOnce.Do(func() {
		s.work = make(chan *item, validateQueueMax)
		for range runtime.GOMAXPROCS(0) {
			go func() {
				for it := range s.work {
					s.cfg.Verifier.Verify(it.env, it.env.Msg)
					close(it.validated)
				}
			}()
		}
	})
	s.work <- it
}
