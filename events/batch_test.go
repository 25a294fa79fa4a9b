package events

import (
	"reflect"
	"testing"
)

func TestBatchRoundTrip(t *testing.T) {
	b := &batch{firstSeq: 41}
	for i := 0; i < 5; i++ {
		e := testEnvelope(i, "credit.transfer", "agent://a.local", "agent://b.local")
		e.Seq = 41 + uint64(i)
		if i == 3 {
			e.Body, e.To = nil, ""
		}
		b.events = append(b.events, e)
	}
	got, err := decodeBatch(encodeBatch(nil, b))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.events, b.events) || got.firstSeq != 41 {
		t.Fatalf("decodeBatch(encodeBatch(b)) =\n%+v\nwant\n%+v", got.events, b.events)
	}
	if got.events[3].Body != nil {
		t.Fatal("a frame without body came back with one")
	}
}

func TestDecodeBatchRefusesDamage(t *testing.T) {
	good := encodeBatch(nil, &batch{firstSeq: 1, events: []*Envelope{testEnvelope(1, "ack", "agent://a", "agent://b")}})
	for _, n := range []int{0, 3, len(batchMagic), len(batchMagic) + 1, len(good) / 2, len(good) - 1} {
		if _, err := decodeBatch(good[:n]); err == nil {
			t.Errorf("decodeBatch(first %d of %d bytes) = nil error", n, len(good))
		}
	}
	if _, err := decodeBatch(append(append([]byte{}, good...), 0)); err == nil {
		t.Error("decodeBatch accepted trailing bytes")
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch(nil, &batch{firstSeq: 7, events: []*Envelope{testEnvelope(1, "ack", "agent://a", "agent://b"), testEnvelope(2, "task.assign", "agent://a", "")}}))
	f.Add([]byte(batchMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := decodeBatch(data)
		if err != nil {
			return
		}
		again, err := decodeBatch(encodeBatch(nil, b))
		if err != nil || !reflect.DeepEqual(again.events, b.events) {
			t.Fatalf("re-encoding a decoded batch changed it: %v", err)
		}
	})
}
