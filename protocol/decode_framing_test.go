package protocol

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// framingNext is the valid frame that follows each case of
// TestNextFrameOffset on the same stream; its ID tells it apart.
const framingNext = "AGLX/1.0 TCP\nFROM: agent://c.local\nTO: agent://d.local\nTYPE: task.result\nID: the-next-frame\n\n{\"task_id\":\"n\"}\n"

// outcome is what one Decode call should give: no error (status 0) and a
// body of bodyLen bytes (-1: no body), or a refusal.
type outcome struct {
	status   Status
	fatal    bool
	bodyLen  int
	mismatch bool
}

func ok(bodyLen int, mismatch bool) outcome { return outcome{bodyLen: bodyLen, mismatch: mismatch} }
func refused(fatal bool) outcome            { return outcome{status: StatusBadRequest, fatal: fatal} }

// withLength returns the reference's first frame (CONTENT-LENGTH: 112, a
// 133-byte body) with its CONTENT-LENGTH value replaced.
func withLength(tb testing.TB, v string) string {
	b := string(referenceFrames(tb)["01-task.assign.aglx"])
	return strings.Replace(b, "CONTENT-LENGTH: 112\n", "CONTENT-LENGTH: "+v+"\n", 1)
}

// withoutBody cuts the body off a reference frame, keeping the separator.
func withoutBody(tb testing.TB, v string) string {
	b := withLength(tb, v)
	return b[:strings.IndexByte(b, '{')]
}

// TestNextFrameOffset: whatever CONTENT-LENGTH says, and whether or not a
// frame has a body, the frame after it on the connection is read from its
// own start line (AGLX-NOTES §1). Each case is fed whole and a byte at a
// time: a body that has not arrived when a CONTENT-LENGTH: 0 frame's
// headers end is refused on its own (wantSplit), the frame behind it still
// read.
func TestNextFrameOffset(t *testing.T) {
	bareCR := "AGLX/1.0 TCP\rFROM: agent://a.local\rTO: agent://b.local\rTYPE: task.result\r\r{\"task_id\":\"cr\"}\r"
	tests := []struct {
		name      string
		in        string
		last      bool // no framingNext after in
		want      []outcome
		wantSplit []outcome // when fed a byte at a time, if not want
	}{
		{name: "length 112, body 133 (the reference)", in: withLength(t, "112"), want: []outcome{ok(133, true)}},
		{name: "length 133, right", in: withLength(t, "133"), want: []outcome{ok(133, false)}},
		{name: "length 134", in: withLength(t, "134"), want: []outcome{ok(133, true)}},
		{name: "length 500", in: withLength(t, "500"), want: []outcome{ok(133, true)}},
		{name: "length 5", in: withLength(t, "5"), want: []outcome{ok(133, true)}},
		{name: "length 2000000", in: withLength(t, "2000000"), want: []outcome{ok(133, true)}},
		{name: "length 0 with a body", in: withLength(t, "0"),
			want: []outcome{refused(false)}, wantSplit: []outcome{ok(-1, false), refused(false)}},
		{name: "length 0 with a body, CRLF", in: strings.ReplaceAll(withLength(t, "0"), "\n", "\r\n"),
			want: []outcome{refused(false)}, wantSplit: []outcome{ok(-1, false), refused(false)}},
		{name: "length 00 with a body on the separator's next line", in: "AGLX/1.0 TCP\nTYPE: ack\nCONTENT-LENGTH: 00\n\n\n  {\"a\": \"}\"}",
			want: []outcome{refused(false)}, wantSplit: []outcome{ok(-1, false), refused(false)}},
		{name: "length 0 with a body, then the end", in: withLength(t, "0"), last: true,
			want: []outcome{refused(false)}, wantSplit: []outcome{ok(-1, false), refused(false)}},
		{name: "length 0, no body", in: withoutBody(t, "0"), want: []outcome{ok(-1, false)}},
		{name: "length 0, no body, then the end", in: withoutBody(t, "0"), last: true, want: []outcome{ok(-1, false)}},
		{name: "no length, no body", in: strings.Replace(withoutBody(t, "0"), "CONTENT-LENGTH: 0\n", "", 1), want: []outcome{refused(false)}},
		{name: "no length, no body, then the end", in: strings.Replace(withoutBody(t, "0"), "CONTENT-LENGTH: 0\n", "", 1), last: true, want: []outcome{refused(false)}},
		{name: "length 5, no body", in: withoutBody(t, "5"), want: []outcome{refused(false)}},
		{name: "bad length, no body", in: withoutBody(t, "x1"), want: []outcome{refused(false)}},
		{name: "no body, then garbage", in: "AGLX/1.0 TCP\nTYPE: ack\n\nAGLY", last: true, want: []outcome{refused(true)}},
		{name: "bare CR line ends", in: bareCR, want: []outcome{refused(true)}},
		{name: "bare CR after the start line only", in: "AGLX/1.0 TCP\rTYPE: ack\n\n{}\n", want: []outcome{refused(true)}},
		{name: "NUL in the start line", in: "AGLX/1.0\x00TCP\nTYPE: ack\n\n{}\n", want: []outcome{refused(true)}},
		{name: "CRLF start line", in: "AGLX/1.0 TCP\r\nTYPE: ack\r\n\r\n{}\r\n", want: []outcome{ok(2, false)}},
		{name: "tab in the start line", in: "AGLX/1.0\tTCP\nTYPE: ack\n\n{}\n", want: []outcome{ok(2, false)}},
	}
	for _, tc := range tests {
		in := tc.in
		if !tc.last {
			in += framingNext
		}
		feeds := []struct {
			name string
			r    func() io.Reader
			want []outcome
		}{
			{"whole", func() io.Reader { return strings.NewReader(in) }, tc.want},
			{"byte by byte", func() io.Reader { return iotest.OneByteReader(strings.NewReader(in)) }, tc.wantSplit},
		}
		for _, feed := range feeds {
			want := feed.want
			if want == nil {
				want = tc.want
			}
			t.Run(tc.name+"/"+feed.name, func(t *testing.T) {
				d := NewDecoder(feed.r(), DecoderOptions{})
				for i, w := range want {
					f, err := d.Decode()
					checkOutcome(t, i, f, err, w)
					if w.fatal {
						if _, again := d.Decode(); again == nil {
							t.Fatalf("Decode after a fatal error = nil, want the error again")
						}
						return
					}
				}
				if !tc.last {
					f, err := d.Decode()
					if err != nil || f.ID() != "the-next-frame" || string(f.Body) != `{"task_id":"n"}` {
						t.Fatalf("the next frame: Decode = %+v, %v; want the frame with ID the-next-frame", f, err)
					}
				}
				if f, err := d.Decode(); !errors.Is(err, io.EOF) {
					t.Fatalf("Decode at the end = %+v, %v; want io.EOF", f, err)
				}
			})
		}
	}
}

func checkOutcome(t *testing.T, i int, f *Frame, err error, w outcome) {
	t.Helper()
	if w.status == 0 {
		if err != nil {
			t.Fatalf("Decode #%d = %v, want a frame", i+1, err)
		}
		if got := len(f.Body); w.bodyLen < 0 && f.Body != nil || w.bodyLen >= 0 && got != w.bodyLen {
			t.Fatalf("Decode #%d: body %q, want %d bytes (-1: none)", i+1, f.Body, w.bodyLen)
		}
		if f.LengthMismatch != w.mismatch {
			t.Fatalf("Decode #%d: LengthMismatch = %v, want %v", i+1, f.LengthMismatch, w.mismatch)
		}
		return
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != w.status || pe.Fatal != w.fatal || pe.Reason == "" {
		t.Fatalf("Decode #%d = %+v, %v; want %d (fatal %v)", i+1, f, err, w.status, w.fatal)
	}
	if !pe.Fatal && f == nil {
		t.Fatalf("Decode #%d: a recoverable refusal without the frame", i+1)
	}
}

// TestBareCRStartLineNamesTheCause: the refusal of a frame with bare CR
// line ends says what is wrong, so the client's author can fix it.
func TestBareCRStartLineNamesTheCause(t *testing.T) {
	_, err := decodeOne(t, []byte("AGLX/1.0 TCP\rTYPE: ack\r\r{}\rAGLX/1.0 TCP\nTYPE: ack\n\n{}\n"))
	if err == nil || !strings.Contains(err.Error(), "control character") || !strings.Contains(err.Error(), "0x0D") {
		t.Fatalf("Decode = %v; want a refusal naming the control character 0x0D", err)
	}
}

// TestLengthZeroBodyRefusalNamesTheHeader: the reply to a CONTENT-LENGTH: 0
// frame with a body says the header is what disagrees, not that the body
// is missing.
func TestLengthZeroBodyRefusalNamesTheHeader(t *testing.T) {
	f, err := decodeOne(t, []byte(withLength(t, "0")))
	if err == nil || !strings.Contains(err.Error(), "CONTENT-LENGTH") || f == nil || f.Type() != "task.assign" {
		t.Fatalf("Decode = %+v, %v; want a refusal naming CONTENT-LENGTH, with the frame's headers", f, err)
	}
	if !bytes.HasPrefix(f.Body, []byte("{")) || !f.LengthMismatch {
		t.Fatalf("Decode: body %q, mismatch %v; want the body kept and the mismatch marked", f.Body, f.LengthMismatch)
	}
}
