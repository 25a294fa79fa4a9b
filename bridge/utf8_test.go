package bridge

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// TestTheEdgeRefusesABodyThatIsNotUTF8: a body with bytes that are not
// UTF-8 was recorded, and a credit.transfer with "caf\xe9" in its reason
// booked, while every strict reader of the stream failed on the event
// (helper-102). JSON text is UTF-8: such a body is refused with 400,
// naming the byte, and nothing is recorded; valid UTF-8, U+FFFD itself
// included, is taken.
func TestTheEdgeRefusesABodyThatIsNotUTF8(t *testing.T) {
	s := New(nil, Config{}, nil)
	for _, tc := range []struct {
		name, body string
		wantAt     string // "" if taken
	}{
		{"Latin-1 in a string", `{"agent_name": "caf` + "\xe9" + `", "status": "READY"}`, "at byte 19"},
		{"a cut sequence", `{"agent_name": "` + "\xe2\x82" + `", "status": "READY"}`, "at byte 16"},
		{"an encoded surrogate", `{"agent_name": "` + "\xed\xa0\x80" + `"}`, "at byte 16"},
		{"UTF-8", `{"agent_name": "café €", "status": "READY"}`, ""},
		{"U+FFFD itself", `{"agent_name": "` + "\uFFFD" + `", "status": "READY"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &protocol.Frame{Transport: protocol.TransportTCP, Body: []byte(tc.body), Headers: []protocol.Header{
				{Name: protocol.HeaderFrom, Value: "agent://a.local"}, {Name: protocol.HeaderTo, Value: "registry://localhost"},
				{Name: protocol.HeaderType, Value: protocol.TypeRegistryUpdate}}}
			it := s.prepare(f, nil, events.TransportTCP, "192.0.2.9:4000")
			s.validate(it)
			switch {
			case tc.wantAt == "" && (it.refusal != nil || it.env == nil):
				t.Fatalf("refused %v; want it taken", it.refusal)
			case tc.wantAt != "" && (protocol.StatusOf(it.refusal) != protocol.StatusBadRequest || it.env != nil):
				t.Fatalf("%v, event %v; want 400 and nothing recorded", it.refusal, it.env != nil)
			case tc.wantAt != "" && !strings.Contains(it.refusal.Error(), tc.wantAt):
				t.Fatalf("%v; want it to name the byte (%s)", it.refusal, tc.wantAt)
			}
		})
	}
}

// TestARefusalSaysWhoAndWhat: a refused frame's log line names its FROM
// and TYPE beside the peer, so that an operator can tell which agent
// keeps sending what (helper-106); a TYPE as long as a header is cut.
func TestARefusalSaysWhoAndWhat(t *testing.T) {
	var logged strings.Builder
	s := New(nil, Config{}, slog.New(slog.NewTextHandler(&logged, nil)))
	for _, typ := range []string{protocol.TypeRegistryUpdate, "x." + strings.Repeat("y", 500)} {
		logged.Reset()
		f := &protocol.Frame{Transport: protocol.TransportTCP, Body: []byte("{\"agent_name\": \"caf\xe9\"}"), Headers: []protocol.Header{
			{Name: protocol.HeaderFrom, Value: "agent://Noisy.local"}, {Name: protocol.HeaderTo, Value: "registry://localhost"},
			{Name: protocol.HeaderType, Value: typ}}}
		it := s.prepare(f, nil, events.TransportTCP, "192.0.2.9:4000")
		s.validate(it)
		line := logged.String()
		if !strings.Contains(line, "from=agent://noisy.local") || !strings.Contains(line, "type="+typ[:min(len(typ), refusedTypeLogMax)]) || len(line) > 1000 {
			t.Errorf("the refusal's log line: %s", line)
		}
	}
}

// TestCutForLogKeepsCharactersWhole: a TYPE or reason cut for a log line
// is cut at the start of a character: cut inside one, the line held
// bytes that are not UTF-8 (helper-111).
func TestCutForLogKeepsCharactersWhole(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"ab€cd", 3, "ab…"}, // € is three bytes, from byte 2
		{"ab€cd", 5, "ab€…"},
		{"€€", 1, "…"},
	} {
		if got := cutForLog(tc.s, tc.max); got != tc.want {
			t.Errorf("cutForLog(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
		}
	}
}
