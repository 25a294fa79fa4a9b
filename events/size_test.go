package events

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"pgregory.net/rapid"
)

// TestAppendRefusesAnEventTooBigForTheStream: a frame whose headers pass
// the decoder's bounds but come, escaped into the envelope, to more than
// the event stream takes is refused with 413 before anything is stored.
// Accepted, it would be acknowledged from the write-ahead stream and then
// refused by the event stream forever, stalling every later event.
func TestAppendRefusesAnEventTooBigForTheStream(t *testing.T) {
	for i, tc := range []struct {
		name    string
		headers int    // extra headers, each HeaderLineSizeMax long
		fill    string // what each is made of
		body    int    // body bytes
	}{
		// Control characters: six bytes each once escaped, past the
		// stream's message size with a full body.
		{"escaped headers and a full body", protocol.HeaderCountMax - 4, "\x01", protocol.BodySizeMaxDefault - 64},
		// Plain ASCII, small body: past JetStream's 64 KiB header bound.
		{"headers past 64 KiB", 9, "a", 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := openTestLog(t, t.TempDir())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			big := testEnvelope(100+i, "task.assign", "agent://a.local", "agent://b.local")
			for range tc.headers {
				big.Headers = append(big.Headers, protocol.Header{Name: "X-Pad", Value: strings.Repeat(tc.fill, protocol.HeaderLineSizeMax-16)})
			}
			big.Body = []byte(`{"x":"` + strings.Repeat("a", tc.body) + `"}`)
			_, err := l.Append(ctx, big).Wait(ctx)
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Status != protocol.StatusTooLarge {
				t.Fatalf("Append of an event too big for the stream = %v, want 413", err)
			}
			if last, err := l.LastSeq(ctx); err != nil || last != 0 {
				t.Fatalf("the event stream ends at %d (%v), want nothing stored", last, err)
			}
			a := appendAll(t, l, testEnvelope(2, "task.assign", "agent://a.local", "agent://b.local"))[0]
			if a.Seq != 1 {
				t.Fatalf("the next append got seq %d, want 1", a.Seq)
			}
		})
	}
}

// TestAppendTakesTheLargestEventThatFits: the limits refuse only what the
// stream would: the biggest body with the usual headers is stored.
func TestAppendTakesTheLargestEventThatFits(t *testing.T) {
	l, _ := openTestLog(t, t.TempDir())
	e := testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local")
	e.Body = []byte(`{"x":"` + strings.Repeat("a", protocol.BodySizeMaxDefault-16) + `"}`)
	if a := appendAll(t, l, e)[0]; a.Seq != 1 {
		t.Fatalf("append got seq %d, want 1", a.Seq)
	}
}

// TestStoredSizeBound: the quick bound is never below the measured size,
// whatever bytes the envelope's strings hold, so checkSize never lets
// through an event it would have refused by measuring.
func TestStoredSizeBound(t *testing.T) {
	anyBytes := rapid.Custom(func(t *rapid.T) string {
		return string(rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "bytes"))
	})
	rapid.Check(t, func(t *rapid.T) {
		e := &Envelope{
			ID: anyBytes.Draw(t, "id"), MsgID: anyBytes.Draw(t, "msgid"), Type: anyBytes.Draw(t, "type"),
			From: anyBytes.Draw(t, "from"), To: anyBytes.Draw(t, "to"), Transport: anyBytes.Draw(t, "transport"),
			Declared: anyBytes.Draw(t, "declared"), Peer: anyBytes.Draw(t, "peer"),
			ReceivedAt: time.Unix(0, rapid.Int64().Draw(t, "at")),
			Body:       []byte(anyBytes.Draw(t, "body")),
		}
		for range rapid.IntRange(0, 10).Draw(t, "headers") {
			e.Headers = append(e.Headers, protocol.Header{Name: anyBytes.Draw(t, "name"), Value: anyBytes.Draw(t, "value")})
		}
		m := toMsg(e, 1<<63)
		if got, bound, measured := headerSize(m.Header), storedHeaderBound(e), storedHeaderSize(e); bound < measured || measured < got {
			t.Fatalf("header bound %d, measured %d, message's %d: want bound >= measured >= message's", bound, measured, got)
		}
	})
}

// TestCollectKeepsBatchesUnderTheirBound: an append that would take a
// batch past BatchBytesMax starts the next one, so the write-ahead stream,
// whose message limit is set from it, never refuses a batch for its size.
func TestCollectKeepsBatchesUnderTheirBound(t *testing.T) {
	l := &Log{queue: make(chan *Pending, 16), batchBytesMax: BatchBytesMax}
	body := []byte(strings.Repeat("a", 900<<10))
	pending := func(i int) *Pending {
		e := testEnvelope(i, "task.assign", "agent://a.local", "agent://b.local")
		e.Body = body
		return newPending(e)
	}
	for i := 1; i < 10; i++ {
		l.queue <- pending(i)
	}
	p := pending(0)
	total := 0
	for batches := 0; p != nil; batches++ {
		pend, next := l.collect(p)
		size := 0
		for _, q := range pend {
			size += encodedSize(q.env)
		}
		if size > l.batchBytesMax {
			t.Fatalf("batch %d of %d appends is %d bytes, more than %d", batches, len(pend), size, l.batchBytesMax)
		}
		total += len(pend)
		p = next
	}
	if total != 10 {
		t.Fatalf("the batches held %d appends, want all 10", total)
	}
}

// startSmallPayloadServer starts a NATS server with JetStream whose
// max_payload is n bytes, as an operator's own server may have.
func startSmallPayloadServer(t *testing.T, n int32) *nats.Conn {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), SyncAlways: true, NoSigs: true, MaxPayload: n})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestBatchesFitTheServersMaxPayload: on a server whose max_payload is
// just what the largest event needs (as OPERATIONS.md asks of an
// operator's server), batches of several large events are cut to fit it
// instead of being refused whole.
func TestBatchesFitTheServersMaxPayload(t *testing.T) {
	nc := startSmallPayloadServer(t, int32(Config{}.withDefaults().eventSizeMax()+walMsgSlack))
	l, err := Open(context.Background(), nc, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	var envs []*Envelope
	for i := range 8 {
		e := testEnvelope(i, "task.assign", "agent://a.local", "agent://b.local")
		e.Body = []byte(`{"x":"` + strings.Repeat("a", 300<<10) + `"}`)
		envs = append(envs, e)
	}
	got := appendAll(t, l, envs...)
	if got[7].Seq != 8 {
		t.Fatalf("the last append got seq %d, want 8", got[7].Seq)
	}
}

// TestOpenRefusesASmallMaxPayload: a server that could not carry the
// largest event is refused at start, with what to change, rather than
// failing appends one by one later.
func TestOpenRefusesASmallMaxPayload(t *testing.T) {
	nc := startSmallPayloadServer(t, 512<<10)
	_, err := Open(context.Background(), nc, Config{}, nil)
	if err == nil || !strings.Contains(err.Error(), "raise max_payload or lower --body-max") {
		t.Fatalf("Open on a server with a 512 KiB max_payload = %v, want a refusal naming max_payload", err)
	}
}

// TestEmbeddedServerTakesTheLargestBodyLimit: a node configured with the
// largest body limit (--body-max 8 MiB) opens its log on the embedded
// server and stores an event of that size.
func TestEmbeddedServerTakesTheLargestBodyLimit(t *testing.T) {
	nc := connectTestServer(t, ServerConfig{DataDir: t.TempDir()})
	l, err := Open(context.Background(), nc, Config{BodySizeMax: protocol.BodySizeMaxLimit}, nil)
	if err != nil {
		t.Fatalf("Open with the largest body limit: %v", err)
	}
	defer l.Close(context.Background())
	e := testEnvelope(1, "task.assign", "agent://a.local", "agent://b.local")
	e.Body = []byte(`{"x":"` + strings.Repeat("a", protocol.BodySizeMaxLimit-16) + `"}`)
	if a := appendAll(t, l, e)[0]; a.Seq != 1 {
		t.Fatalf("append got seq %d, want 1", a.Seq)
	}
}
