package protocol

import (
	"bytes"
	"runtime"
	"testing"
)

// TestParsedPayloadSize holds every TYPE with a list in its payload to
// ParsedSizePerBodyByteMax: the node bounds frames in memory by
// Frame.MemorySize, which is only a bound if no payload takes more. The
// worst bodies are lists of the shortest items the payload allows.
// (Capabilities and expertise, lists of one-letter strings at four bytes
// of heap a byte, are at most LabelsMax long, so they are refused before
// they are kept; the lists below have no count bound but the body's.)
func TestParsedPayloadSize(t *testing.T) {
	fill := func(head, item, tail string) []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for b.Len() < 1<<20-200 {
			b.WriteString(item)
			b.WriteString(",")
		}
		b.WriteString(item)
		b.WriteString(tail)
		return b.Bytes()
	}
	tests := []struct {
		typ  string
		body []byte
	}{
		{TypeRegistrySync, fill(`{"entries":[`, `{"agent_id":"a","agent_uri":"agent://b"}`, `]}`)},
		{TypeRegistryList, fill(`{"entries":[`, `{"agent_id":"a","agent_uri":"agent://b"}`, `]}`)},
		{TypeRegistryExchange, fill(`{"known_agents":[`, `{"agent_uri":"agent://b"}`, `]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			f := &Frame{Transport: TransportTCP, Headers: []Header{{"FROM", "agent://a.local"}, {"TO", "registry://localhost"}, {"TYPE", tt.typ}}, Body: tt.body}
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			msg, err := Parse(f)
			runtime.GC()
			runtime.ReadMemStats(&m1)
			if err != nil {
				t.Fatal(err)
			}
			kept := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
			if kept > ParsedSizePerBodyByteMax*int64(len(tt.body)) {
				t.Errorf("a %d-byte body takes %d bytes parsed (%.1f a byte), more than ParsedSizePerBodyByteMax, %d",
					len(tt.body), kept, float64(kept)/float64(len(tt.body)), ParsedSizePerBodyByteMax)
			}
			if f.MemorySize() < int64(len(tt.body))+kept {
				t.Errorf("MemorySize %d is below the body and its payload, %d", f.MemorySize(), int64(len(tt.body))+kept)
			}
			runtime.KeepAlive(msg)
		})
	}
}
