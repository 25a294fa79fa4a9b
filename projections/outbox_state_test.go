package projections

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/ledger/statecodec/statetest"
	"github.com/aglx/ledger/protocol"
)

// The outbox's saved state: a restored outbox holds the same replies, in
// the same order of eviction, the same refusals and how far both were let
// go of, and its replies that wait for the node's signature are signed to
// the same bytes.

// compareOutboxes fails unless want and got hold the same replies and
// refusals. It uses reflect.DeepEqual, which compares unexported fields
// and tells nil from empty, since statetest.Diff takes seconds over the
// tens of thousands of replies an outbox holds at its bound; a reply's
// signature, whose func DeepEqual cannot compare, is compared by what it
// signs and what it signed.
func compareOutboxes(t *testing.T, when string, want, got *Outbox) {
	t.Helper()
	if !reflect.DeepEqual(want.order, got.order) || want.bytes != got.bytes || want.evicted != got.evicted ||
		!reflect.DeepEqual(want.refusals, got.refusals) || want.refusalsEvicted != got.refusalsEvicted || len(want.bySeq) != len(got.bySeq) {
		t.Fatalf("%s, the outboxes differ: %d replies (%d bytes, evicted to %d) and %d refusals (let go to %d), and %d (%d, %d) and %d (%d)",
			when, len(want.order), want.bytes, want.evicted, len(want.refusals), want.refusalsEvicted,
			len(got.order), got.bytes, got.evicted, len(got.refusals), got.refusalsEvicted)
	}
	for seq, w := range want.bySeq {
		g := got.bySeq[seq]
		same := (w.sign == nil) == (g.sign == nil)
		if same && w.sign != nil {
			same = w.sign.to == g.sign.to && bytes.Equal(w.sign.body, g.sign.body)
		}
		w.sign, g.sign = nil, nil
		if !same || !reflect.DeepEqual(w, g) {
			t.Fatalf("%s, the outboxes' replies to seq %d differ", when, seq)
		}
	}
}

// TestOutboxStateRoundTrip: outboxes past each of their bounds (replies
// by count, replies by bytes, refusals) are restored the same, save to
// the bytes they were loaded from, and go on to take replies as the
// saved ones do.
func TestOutboxStateRoundTrip(t *testing.T) {
	ack := Reply{Type: protocol.TypeAck, Status: protocol.StatusOK, Body: []byte(`{}`)}
	refusal := ErrorReply(protocol.StatusPaymentRequired, "no")
	big := Reply{Type: protocol.TypeRegistryList, Status: protocol.StatusOK, Body: bytes.Repeat([]byte("x"), 1<<20)}
	tests := []struct {
		name string
		fill func(o *Outbox)
	}{
		{"empty", func(*Outbox) {}},
		{"a few replies, one with no body and one with an empty one", func(o *Outbox) {
			o.Put(3, ack)
			o.Put(4, refusal)
			o.Put(6, Reply{Type: protocol.TypeAck, Status: protocol.StatusOK})
			o.Put(7, Reply{Type: protocol.TypeAck, Status: protocol.StatusOK, Body: []byte{}, FirstOnly: true})
		}},
		{"replies past their count", func(o *Outbox) {
			for seq := uint64(1); seq <= OutboxMax+100; seq++ {
				if seq%10 == 0 {
					o.Put(seq, refusal)
				} else {
					o.Put(seq, ack)
				}
			}
		}},
		{"replies past their bytes", func(o *Outbox) {
			for seq := uint64(1); seq <= 70; seq++ {
				o.Put(seq, big)
			}
		}},
		{"refusals past their bound", func(o *Outbox) {
			for seq := uint64(1); seq <= RefusalsMax+10; seq++ {
				o.Put(2*seq, refusal)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewOutbox()
			tc.fill(a)
			saved := saveOutbox(t, a)
			if !bytes.Equal(saved, saveOutbox(t, a)) {
				t.Fatal("two saves of one outbox differ")
			}
			b := NewOutbox()
			if err := loadOutbox(b, nil, saved); err != nil {
				t.Fatalf("LoadState: %v", err)
			}
			compareOutboxes(t, "after the restore", a, b)
			if !bytes.Equal(saved, saveOutbox(t, b)) {
				t.Fatal("the restored outbox saves to other bytes than it was loaded from")
			}
			last := uint64(0)
			if n := len(a.order); n > 0 {
				last = a.order[n-1]
			}
			for i := uint64(1); i <= 20; i++ {
				for _, o := range []*Outbox{a, b} {
					o.Put(last+i, []Reply{ack, refusal, big}[i%3])
				}
			}
			compareOutboxes(t, "after more replies", a, b)
			for seq := uint64(0); seq <= last+21; seq += 1 + last/1000 {
				ra, oka, erra := a.Take(seq)
				rb, okb, errb := b.Take(seq)
				fa, ka := a.Refused(seq)
				fb, kb := b.Refused(seq)
				if oka != okb || erra != errb || !reflect.DeepEqual(ra, rb) || fa != fb || ka != kb {
					t.Fatalf("seq %d: the saved outbox gives %v %v %v %v, the restored one %v %v %v %v", seq, oka, erra, fa, ka, okb, errb, fb, kb)
				}
			}
		})
	}
}

// TestOutboxStateSignatures: the auth.responses an outbox holds are signed
// as they are taken; restored, those taken before the save keep the body
// they were signed to, those not taken yet are signed with the node's key
// of the registry given to LoadState, to the same bytes, and the copies
// of one reply (the reply to a request and to its resend) share one
// signature again. Without a registry, or one with no node key, a reply
// that waits for a signature is refused.
func TestOutboxStateSignatures(t *testing.T) {
	s := newStateScript(t)
	var binds []*Event
	for i := range 4 {
		binds = append(binds, s.bind(fmt.Sprintf("agent://k%d.local", i), s.newKey()))
	}
	s.wait(time.Second)
	s.resend(binds[3])
	resend := s.evs[len(s.evs)-1]
	a, oa := newStateFolds(s.cfg)
	for _, e := range s.evs {
		for _, p := range a.All() {
			p.Apply(e)
		}
	}
	oa.Take(binds[0].Seq) // signed before the save; the others wait
	saved := saveOutbox(t, oa)

	reg, b := NewFolds(s.cfg).Registry, NewOutbox()
	if err := loadOutbox(b, reg, saved); err != nil {
		t.Fatalf("LoadState: %v", err)
	}
	if d := statetest.Diff(oa, b); d != "" {
		t.Fatalf("the restored outbox differs (-saved +restored):\n%s", d)
	}
	if b.bySeq[binds[3].Seq].sign != b.bySeq[resend.Seq].sign {
		t.Fatal("the replies to a request and to its resend no longer share their signature")
	}
	if b.bySeq[binds[0].Seq].sign.body == nil || b.bySeq[binds[1].Seq].sign.body != nil {
		t.Fatal("a reply signed before the save was restored unsigned, or one waiting was restored signed")
	}
	for _, e := range append(binds, resend) {
		ra, _, _ := oa.Take(e.Seq)
		rb, _, _ := b.Take(e.Seq)
		if ra.Status != protocol.StatusOK || !bytes.Equal(ra.Body, rb.Body) || !strings.Contains(string(rb.Body), `"signature"`) {
			t.Fatalf("seq %d: the saved outbox's reply %d %s, the restored one's %s", e.Seq, ra.Status, ra.Body, rb.Body)
		}
	}

	noKey := s.cfg
	noKey.NodeKey, noKey.NodePublicKey = nil, nodeKey.Public()
	for name, reg := range map[string]*Registry{"no registry": nil, "a registry with no node key": NewRegistry(noKey)} {
		if err := loadOutbox(NewOutbox(), reg, saved); err == nil || !strings.Contains(err.Error(), "no key to sign") {
			t.Errorf("%s: LoadState = %v; want a refusal of the replies to sign", name, err)
		}
	}
}

// TestOutboxStateRefused: LoadState refuses a state the outbox's code
// could not work on, and an outbox that is not fresh.
func TestOutboxStateRefused(t *testing.T) {
	ack := Reply{Type: protocol.TypeAck, Status: protocol.StatusOK}
	write := func(f func(w *statecodec.Writer)) []byte {
		w := statecodec.NewWriter(nil)
		f(w)
		return w.Bytes()
	}
	tests := []struct {
		name, want string
		state      []byte
	}{
		{"a reply saved twice", "saved twice", write(func(w *statecodec.Writer) {
			w.Len(2)
			w.Uint(5)
			writeReply(w, ack)
			w.Uint(5)
			writeReply(w, ack)
			w.Uint(0)
			w.Uint(0)
			w.Len(0)
		})},
		{"refusals not ascending", "not after", write(func(w *statecodec.Writer) {
			w.Len(0)
			w.Uint(0)
			w.Uint(9)
			w.Len(2)
			w.Uint(1)
			w.Uint(0)
		})},
		{"refusals past the largest sequence", "not after", write(func(w *statecodec.Writer) {
			w.Len(0)
			w.Uint(0)
			w.Uint(1 << 63)
			w.Len(1)
			w.Uint(1 << 63)
		})},
		{"a status out of range", "status", write(func(w *statecodec.Writer) {
			w.Len(1)
			w.Uint(5)
			w.String("ack")
			w.Int(1 << 40)
		})},
		{"a byte more", "left after", append(saveOutbox(t, NewOutbox()), 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := loadOutbox(NewOutbox(), nil, tc.state); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadState = %v; want an error with %q", err, tc.want)
			}
		})
	}
	used := NewOutbox()
	used.Put(1, ack)
	if err := loadOutbox(used, nil, saveOutbox(t, NewOutbox())); err == nil {
		t.Fatal("a state loaded into an outbox that holds replies")
	}
}

// FuzzLoadStateOutbox: arbitrary bytes into LoadState never panic, and an
// outbox that loads takes, puts and answers about refusals without
// panicking either. The seeds are real saved outboxes.
func FuzzLoadStateOutbox(f *testing.F) {
	s := newStateScript(f)
	for i := range 3 {
		s.bind(fmt.Sprintf("agent://k%d.local", i), s.newKey())
	}
	a, oa := newStateFolds(s.cfg)
	for _, e := range s.evs {
		for _, p := range a.All() {
			p.Apply(e)
		}
	}
	oa.Take(s.evs[len(s.evs)-1].Seq)
	f.Add(saveOutbox(f, oa))
	f.Add(saveOutbox(f, NewOutbox()))
	small := NewOutbox()
	small.Put(2, ErrorReply(protocol.StatusConflict, "no"))
	small.Put(3, Reply{Type: protocol.TypeAck, Status: protocol.StatusOK, FirstOnly: true})
	f.Add(saveOutbox(f, small))
	cfg := s.cfg
	f.Fuzz(func(t *testing.T, data []byte) {
		o := NewOutbox()
		c := cfg
		c.Outbox = o
		reg := NewRegistry(c)
		if o.LoadState(statecodec.NewReader(data), reg) != nil {
			return
		}
		seqs := append([]uint64{0, 1, 1 << 63}, o.order...)
		for _, seq := range seqs {
			o.Take(seq)
			o.Refused(seq)
		}
		next := uint64(1)
		if n := len(o.order); n > 0 {
			next = o.order[n-1] + 1
		}
		o.Put(next, ErrorReply(protocol.StatusConflict, "no"))
		o.Put(next+1, Reply{Type: protocol.TypeAck, Status: protocol.StatusOK})
		o.Take(next)
		saveOutbox(t, o)
	})
}
