package bridge

import "runtime"

// validateQueueMax bounds the frames waiting for a validation worker, over
// all connections. A reader that finds it full waits: back-pressure again.
const validateQueueMax = 4096 // frames

// validateAsync hands it to the validation workers. Validation (payload
// decoding now, signature checks later) is the CPU-heavy part of ingest, so
// it runs on one worker per core, for frames of all connections alike;
// each connection's sequencer restores the arrival order.
func (s *Server) validateAsync(it *item) {
	s.workOnce.Do(func() {
		s.work = make(chan *item, validateQueueMax)
		for range runtime.GOMAXPROCS(0) {
			go func() {
				for it := range s.work {
					s.validate(it)
				}
			}()
		}
	})
	s.work <- it
}
