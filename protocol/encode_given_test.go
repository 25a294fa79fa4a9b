package protocol

import "testing"

// TestAppendFrameAsGiven: the headers come out as given, CONTENT-LENGTH
// included or absent, none added; a control character in a header (which
// the decoder never stores, but a frame built by hand may hold) is a
// space, so that it cannot start a line of its own.
func TestAppendFrameAsGiven(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
		want string
	}{
		{"a wrong length kept", Frame{Transport: TransportTCP, Headers: []Header{{"TYPE", "ack"}, {"CONTENT-LENGTH", "112"}}, Body: []byte("{}")},
			"AGLX/1.0 TCP\nTYPE: ack\nCONTENT-LENGTH: 112\n\n{}\n"},
		{"no length, none added", Frame{Headers: []Header{{"TYPE", "ack"}, {"x-a", "1"}, {"X-A", "2"}}, Body: []byte("{}")},
			"AGLX/1.0 TCP\nTYPE: ack\nx-a: 1\nX-A: 2\n\n{}\n"},
		{"no body", Frame{Transport: TransportUDP, Headers: []Header{{"TYPE", "agent.announce"}}},
			"AGLX/1.0 UDP\nTYPE: agent.announce\n\n"},
		{"a line break in a value", Frame{Headers: []Header{{"TYPE", "ack\nFROM: agent://forged"}}},
			"AGLX/1.0 TCP\nTYPE: ack FROM: agent://forged\n\n"},
	}
	for _, tt := range tests {
		if got := string(AppendFrameAsGiven(nil, &tt.f)); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
