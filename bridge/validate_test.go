package bridge

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// recordingVerifier counts the checks of each event and the size of each
// batch. Its first batch waits until frames queue up behind it, so that
// the workers have batches to form.
type recordingVerifier struct {
	srv     *Server
	mu      sync.Mutex
	checked map[string]int
	batches []int
	first   sync.Once
}

func (v *recordingVerifier) NeedsCheck(*events.Envelope, *protocol.Message) bool { return true }

func (v *recordingVerifier) VerifyBatch(envs []*events.Envelope) {
	v.first.Do(func() {
		for deadline := time.Now().Add(10 * time.Second); len(v.srv.work) < 3*verifyBatchMax && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	})
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range envs {
		v.checked[e.ID]++
	}
	v.batches = append(v.batches, len(envs))
}

// signedLookingFrame is benchFrame with a signature member: a frame
// without one has nothing to check and skips the workers. The recording
// verifier does not read it.
func signedLookingFrame(i int) []byte {
	return fmt.Appendf(nil, "AGLX/1.0 TCP\nFROM: agent://owner%02d.local\nTO: agent://worker05.local\nTYPE: credit.transfer\nCONTENT-TYPE: application/json\n\n"+
		`{"amount": 3, "currency": "AGLX", "reason": "r", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-%08d", "signature": "ed25519:00"}`+"\n", i%100, i)
}

func (v *recordingVerifier) Forget(*events.Envelope) {}

func (v *recordingVerifier) count(id string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.checked[id]
}

// TestEveryFrameIsCheckedOnceBeforeItsReply: with connections pipelining
// frames whose signatures are to be checked, the validation workers check
// every frame exactly once, in batches no larger than verifyBatchMax,
// and a frame's reply is written only after its check.
func TestEveryFrameIsCheckedOnceBeforeItsReply(t *testing.T) {
	l, quiet := openBenchLog(t)
	v := &recordingVerifier{checked: map[string]int{}}
	srv := New(l, Config{Verifier: v}, quiet)
	v.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTCP(ln, events.TransportTCP)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	const conns, per = 4, 300
	var wg sync.WaitGroup
	errs := make(chan string, conns)
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := Dial(context.Background(), ln.Addr().String())
			if err != nil {
				errs <- err.Error()
				return
			}
			defer cl.Close()
			for i := range per {
				cl.Write(signedLookingFrame(c*per + i))
			}
			cl.Flush()
			for i := range per {
				r, err := cl.ReadReply()
				if err != nil {
					errs <- err.Error()
					return
				}
				id := r.Value(protocol.HeaderInReplyTo)
				if n := v.count(id); n != 1 {
					errs <- fmt.Sprintf("the reply to %s came after %d checks of it, not one", id, n)
					return
				}
				if i == 0 && r.Type() != "ack" {
					errs <- "reply " + r.Type() + ": " + string(r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.checked) != conns*per {
		t.Fatalf("%d frames were checked, want %d", len(v.checked), conns*per)
	}
	largest := 0
	for _, n := range v.batches {
		largest = max(largest, n)
	}
	if largest < 2 || largest > verifyBatchMax {
		t.Fatalf("the largest batch held %d frames; want batches of 2 to %d while frames wait", largest, verifyBatchMax)
	}
}

// TestAcceptedSaysWhetherTheRelayDelivers: 202 means recorded and queued
// for delivery; a message the relay will never deliver is answered 200
// once recorded. A frame that arrives with a RELAYED-BY header, whatever
// its value, is never relayed again (the relay is one hop), and a
// sender's own RELAYED-BY got 202 while its message was silently never
// delivered (helper-108).
func TestAcceptedSaysWhetherTheRelayDelivers(t *testing.T) {
	s := New(nil, Config{}, nil)
	for _, tc := range []struct {
		name   string
		to     string
		extra  []protocol.Header
		status protocol.Status
	}{
		{"to an agent", "agent://w.local", nil, protocol.StatusAccepted},
		{"to an agent, relayed once", "agent://w.local", []protocol.Header{{Name: "RELAYED-BY", Value: "registry://elsewhere"}}, protocol.StatusOK},
		{"to an agent, an empty RELAYED-BY", "agent://w.local", []protocol.Header{{Name: "Relayed-By", Value: ""}}, protocol.StatusOK},
		{"to the node", "registry://localhost", nil, protocol.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &protocol.Frame{Transport: protocol.TransportTCP, Body: []byte(`{"task":"analyze"}`), Headers: append([]protocol.Header{
				{Name: protocol.HeaderFrom, Value: "agent://a.local"}, {Name: protocol.HeaderTo, Value: tc.to},
				{Name: protocol.HeaderType, Value: protocol.TypeTaskAssign}}, tc.extra...)}
			it := s.prepare(f, nil, events.TransportTCP, "192.0.2.9:4000")
			s.validate(it)
			if it.refusal != nil || it.env == nil {
				t.Fatalf("refused: %v", it.refusal)
			}
			if it.accepted != tc.status {
				t.Fatalf("accepted with %d, want %d", it.accepted, tc.status)
			}
		})
	}
}
