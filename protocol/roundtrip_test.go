package protocol

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestWhatTheNodeAcceptsItCanWriteOn: a frame the node accepts must come
// back through its own decoder once it writes it on (with its
// CONTENT-LENGTH, and a relay's RELAYED-BY), and anything its encoder
// writes must decode. Accepted at 64 header lines, a frame came back with
// 66; a line of exactly 8 KiB without the space after the colon came back
// a byte too long; control characters and invalid UTF-8 went out as they
// were.
func TestWhatTheNodeAcceptsItCanWriteOn(t *testing.T) {
	decode := func(b []byte) (*Frame, error) {
		return NewDecoder(bytes.NewReader(b), DecoderOptions{}).Decode()
	}
	many := func(n int) string {
		var b strings.Builder
		b.WriteString("AGLX/1.0 TCP\nFROM: agent://alpha.local\nTO: agent://beta.local\nTYPE: ack\n")
		for i := 3; i < n; i++ {
			fmt.Fprintf(&b, "X-H%d: v\n", i)
		}
		return b.String() + "\n{}\n"
	}
	tests := []struct {
		name   string
		in     string
		status Status // 0: accepted
	}{
		{"62 header lines", many(HeaderCountKeptMax), 0},
		{"63 header lines", many(HeaderCountKeptMax + 1), StatusTooLarge},
		{"a line of 8 KiB without a space", "AGLX/1.0 TCP\nFROM: agent://alpha.local\nTO: agent://beta.local\nTYPE: ack\nX-Note:" +
			strings.Repeat("a", HeaderLineSizeMax-len("X-Note:")) + "\n\n{}\n", StatusTooLarge},
		{"a line of 8 KiB with the space", "AGLX/1.0 TCP\nFROM: agent://alpha.local\nTO: agent://beta.local\nTYPE: ack\nX-Note: " +
			strings.Repeat("a", HeaderLineSizeMax-len("X-Note: ")) + "\n\n{}\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := decode([]byte(tt.in))
			if tt.status != 0 {
				if StatusOf(err) != tt.status {
					t.Fatalf("Decode = %v, want %d", err, tt.status)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode = %v", err)
			}
			f.Headers = append(f.Headers, Header{Name: "RELAYED-BY", Value: "registry://node.local"})
			if _, err := decode(Encode(f)); err != nil {
				t.Fatalf("the frame written on does not decode: %v", err)
			}
		})
	}
	for _, v := range []string{"a\x01b", "a\x7fb", "a\xffb", "a\rb\nc"} {
		f := &Frame{Transport: TransportTCP, Headers: []Header{{HeaderFrom, "agent://alpha.local"}, {HeaderTo, "agent://beta.local"},
			{HeaderType, TypeAck}, {"X-Note", v}}, Body: []byte(`{}`)}
		if _, err := decode(Encode(f)); err != nil {
			t.Errorf("Decode(Encode(X-Note %q)) = %v", v, err)
		}
	}
}

// TestLongIDIsRefused: the ID comes back as IN-REPLY-TO, nine bytes
// longer, so an ID near the line limit made a reply no decoder reads. (An
// empty ID is refused at the edge, not here: Parse reads stored events
// too, and an event stored with one must fold as it did.)
func TestLongIDIsRefused(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{{"pay-1", true}, {strings.Repeat("a", IDSizeMax), true}, {strings.Repeat("a", IDSizeMax+1), false}, {"a b", false}} {
		f := testFrame(TypeTaskCancel, `{"task_id": "t", "reason": "r"}`)
		f.Headers = append(f.Headers, Header{Name: HeaderID, Value: tt.id}) // testFrame leaves out empty values
		if _, err := Parse(f); (err == nil) != tt.ok {
			t.Errorf("Parse with ID %.20q = %v, want ok=%v", tt.id, err, tt.ok)
		}
	}
}
