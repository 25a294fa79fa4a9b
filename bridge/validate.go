package bridge

import (
	"runtime"

	"github.com/aglx/ledger/events"
)

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

// verifyBatchMax bounds the frames one validation worker takes at once.
// The worker takes whatever is waiting, up to this, and checks their
// signatures as one batch (protocol.SigBatcher): about half the cost of
// one by one at 32, less at 128. A lone frame is checked alone, at once.
const verifyBatchMax = 128 // frames

// validateAsync validates it on the calling goroutine (the connection's
// reader) and hands it to the validation workers only if its signature is
// to be checked: that check, tens of microseconds, is the one step worth a
// trip to another goroutine; the rest costs a few microseconds and each
// hand-off adds a wait for a core. The workers, one per core, check frames
// of all connections alike, in batches of what is waiting, as the
// committer commits; each connection's sequencer restores the arrival
// order.
func (s *Server) validateAsync(it *item) {
	if !s.validate(it) {
		it.validated = alreadyValidated
		return
	}
	it.validated = make(chan struct{})
	s.workOnce.Do(func() {
		s.work = make(chan *item, validateQueueMax)
		for range runtime.GOMAXPROCS(0) {
			go s.verifyWorker()
		}
	})
	s.work <- it
}

// verifyWorker checks the signatures of the frames on s.work until it is
// closed.
func (s *Server) verifyWorker() {
	items := make([]*item, 0, verifyBatchMax)
	envs := make([]*events.Envelope, 0, verifyBatchMax)
	for it := range s.work {
		items = append(items[:0], it)
		// All that is waiting, up to the bound, not a share per core: on
		// a node busy enough for a queue to form the other cores have
		// other work, and one larger batch costs less CPU than two halves
		// (in alternating runs of aglx bench -only signed, splitting the
		// queue between the workers cost 2-4 µs a transfer).
	more:
		for len(items) < verifyBatchMax {
			select {
			case next, ok := <-s.work:
				if !ok {
					break more
				}
				items = append(items, next)
			default:
				break more
			}
		}
		envs = envs[:0]
		for _, it := range items {
			envs = append(envs, it.env)
		}
		s.cfg.Verifier.VerifyBatch(envs)
		for _, it := range items {
			close(it.validated)
		}
		clear(envs) // hold no frame past its batch
		clear(items)
	}
}
