package projections

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// FuzzFolds feeds arbitrary frames, one after another, through the folds
// the node runs (registry, ledger, stats) and takes their snapshots. None
// may panic: the runner does not recover, so a fold that panics on an
// event would crash the node at every start, when it replays that event.
// A frame that does not parse reaches the folds as the log would give it,
// with no message (anything a NATS client can publish on the log's
// subjects may be in the log).
func FuzzFolds(f *testing.F) {
	files, err := filepath.Glob("../testdata/reference/*.aglx")
	if err != nil || len(files) == 0 {
		f.Fatalf("reference frames: %v", err)
	}
	var all []byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newHarness(t)
		credits := NewCredits(testNode, h.r, h.out)
		stats := NewStats()
		dec := protocol.NewDecoder(bytes.NewReader(data), protocol.DecoderOptions{})
		at := time.Date(2025, 10, 29, 18, 0, 0, 0, time.UTC)
		for range 64 { // frames
			fr, err := dec.Decode()
			var pe *protocol.Error
			if fr == nil || (err != nil && (!errors.As(err, &pe) || pe.Fatal)) || errors.Is(err, io.EOF) {
				break
			}
			msg, perr := protocol.Parse(fr)
			if perr != nil {
				msg = nil
			}
			h.seq++
			id := fmt.Sprintf("01JFUZZ%019d", h.seq)
			env := &events.Envelope{ID: id, MsgID: id, Seq: h.seq, Type: fr.Type(), From: fr.From(), To: fr.To(),
				Transport: events.TransportTLS, Declared: fr.Transport, Peer: "127.0.0.1:40001", ReceivedAt: at,
				Headers: fr.Headers, Body: fr.Body}
			if msg != nil {
				env.Type, env.From, env.To = msg.Info.Name, msg.From.String(), msg.To.String()
			}
			ev := &Event{Envelope: env, Msg: msg}
			h.r.Apply(ev)
			credits.Apply(ev)
			stats.Apply(ev)
			at = at.Add(time.Duration(len(fr.Body)%90) * time.Minute)
		}
		if _, err := h.r.Snapshot(); err != nil {
			t.Fatalf("registry snapshot: %v", err)
		}
		if _, err := credits.Snapshot(); err != nil {
			t.Fatalf("ledger snapshot: %v", err)
		}
		if _, err := stats.Snapshot(); err != nil {
			t.Fatalf("stats snapshot: %v", err)
		}
	})
}
