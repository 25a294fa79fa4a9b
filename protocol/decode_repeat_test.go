package protocol

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// BenchmarkDecode decodes a stream of frames as one connection sends them:
// the same FROM, TO and TYPE, a fresh ID each time.
func BenchmarkDecode(b *testing.B) {
	var stream bytes.Buffer
	const frames = 1024
	for i := range frames {
		body := fmt.Sprintf(`{"task_id":"t-%06d","status":"done","result":{"rows":42},"timestamp":"2026-11-30T12:00:00Z"}`, i)
		fmt.Fprintf(&stream, "AGLX/1.0 TCP\nFROM: agent://worker07.local\nTO: registry://localhost\nTYPE: task.result\nID: 01JBE3Q4R8W5X9ZK2M7N%06d\nCONTENT-TYPE: application/json\nCONTENT-LENGTH: %d\n\n%s\n", i, len(body), body)
	}
	in := stream.Bytes()
	b.SetBytes(int64(len(in) / frames))
	b.ReportAllocs()
	var d *Decoder
	for i := 0; b.Loop(); i++ {
		if i%frames == 0 {
			d = NewDecoder(bytes.NewReader(in), DecoderOptions{})
		}
		if _, err := d.Decode(); err != nil && err != io.EOF {
			b.Fatal(err)
		}
	}
}

// TestDecoderReusesOnlyEqualValues: header values a decoder reuses from
// the frame before are reused only when equal; each frame reads back
// exactly what was sent.
func TestDecoderReusesOnlyEqualValues(t *testing.T) {
	froms := []string{"agent://a.local", "agent://a.local", "agent://b.local", "agent://a.local", "agent://a.local "}
	types := []string{"task.result", "task.assign", "task.assign", "task.result", "task.result"}
	var stream bytes.Buffer
	for i := range froms {
		fmt.Fprintf(&stream, "AGLX/1.0 TCP\nFROM: %s\nTO: registry://localhost\nTYPE: %s\nContent-Type: application/json\n\n{}\n", froms[i], types[i])
	}
	d := NewDecoder(&stream, DecoderOptions{})
	for i := range froms {
		f, err := d.Decode()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		want := []Header{{HeaderFrom, strings.TrimSpace(froms[i])}, {HeaderTo, "registry://localhost"}, {HeaderType, types[i]}, {"Content-Type", "application/json"}}
		if !reflect.DeepEqual(f.Headers, want) {
			t.Errorf("frame %d: headers %q, want %q", i, f.Headers, want)
		}
	}
}
