package protocol

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// referenceFrames returns the reference's example frames, byte for byte.
func referenceFrames(tb testing.TB) map[string][]byte {
	tb.Helper()
	paths, err := filepath.Glob("../testdata/reference/*.aglx")
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no reference frames: %v", err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

func decodeOne(t *testing.T, b []byte) (*Frame, error) {
	t.Helper()
	return NewDecoder(bytes.NewReader(b), DecoderOptions{}).Decode()
}

func TestReferenceFramesDecodeAndRoundTrip(t *testing.T) {
	for name, b := range referenceFrames(t) {
		t.Run(name, func(t *testing.T) {
			f, err := decodeOne(t, b)
			if err != nil {
				t.Fatalf("Decode(%s) = %v", name, err)
			}
			if f.Type() == "" || f.From() == "" || len(f.Body) == 0 {
				t.Fatalf("Decode(%s) = %+v: missing TYPE, FROM or body", name, f)
			}
			// The body is the JSON object exactly as printed.
			start := bytes.IndexByte(b, '{')
			end := bytes.LastIndexByte(b, '}')
			if !bytes.Equal(f.Body, b[start:end+1]) {
				t.Fatalf("body = %q, want %q", f.Body, b[start:end+1])
			}
			again, err := decodeOne(t, Encode(f))
			if err != nil {
				t.Fatalf("Decode(Encode(%s)) = %v", name, err)
			}
			if !bytes.Equal(again.Body, f.Body) || !sameHeaders(again, f) || again.Transport != f.Transport {
				t.Fatalf("round trip changed the frame:\n got %+v\nwant %+v", again, f)
			}
		})
	}
}

// sameHeaders compares headers, ignoring CONTENT-LENGTH, which Encode
// always rewrites.
func sameHeaders(a, b *Frame) bool {
	strip := func(f *Frame) []Header {
		var out []Header
		for _, h := range f.Headers {
			if !strings.EqualFold(h.Name, HeaderContentLength) {
				out = append(out, h)
			}
		}
		return out
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

func TestContentLengthIsAdvisory(t *testing.T) {
	b := referenceFrames(t)["01-task.assign.aglx"]
	f, err := decodeOne(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if !f.LengthMismatch || len(f.Body) != 133 || f.Value(HeaderContentLength) != "112" {
		t.Fatalf("frame 01: mismatch=%v body=%d CONTENT-LENGTH=%q; want mismatch, 133, 112", f.LengthMismatch, len(f.Body), f.Value(HeaderContentLength))
	}
	if got := Encode(f); !bytes.Contains(got, []byte("CONTENT-LENGTH: 133\n")) {
		t.Fatalf("Encode wrote %q, want a correct CONTENT-LENGTH", got)
	}
}

// TestStreamOfFrames checks that frames are found back to back whatever the
// line ends, separators and lengths say.
func TestStreamOfFrames(t *testing.T) {
	var all bytes.Buffer
	var names []string
	for name, b := range referenceFrames(t) {
		names = append(names, name)
		all.Write(b)
	}
	variants := map[string][]byte{
		"as printed":       all.Bytes(),
		"crlf":             bytes.ReplaceAll(all.Bytes(), []byte("\n"), []byte("\r\n")),
		"no blank between": bytes.ReplaceAll(all.Bytes(), []byte("}\nAGLX"), []byte("}AGLX")),
		"empty separator":  bytes.ReplaceAll(all.Bytes(), []byte("\n\u00a0\n"), []byte("\n\n")),
	}
	for vname, stream := range variants {
		t.Run(vname, func(t *testing.T) {
			d := NewDecoder(bytes.NewReader(stream), DecoderOptions{})
			n := 0
			for {
				_, err := d.Decode()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("frame %d: %v", n+1, err)
				}
				n++
			}
			if n != len(names) {
				t.Fatalf("decoded %d frames, want %d", n, len(names))
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	good := "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\n\n{\"task_id\":\"x\"}\n"
	tests := []struct {
		name   string
		in     string
		status Status
		fatal  bool
	}{
		{"garbage", "hello world\n", StatusBadRequest, true},
		{"http", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", StatusBadRequest, true},
		{"version", "AGLX/2.0 TCP\nTYPE: ack\n\n{}\n", StatusVersionUnsupported, true},
		{"version with many digits", "AGLX/10.25 TCP\nTYPE: ack\n\n{}\n", StatusVersionUnsupported, true},
		{"space left out after the version", "AGLX/1.0TCP\nTYPE: ack\n\n{}\n", StatusBadRequest, true},
		{"version not a number", "AGLX/one TCP\nTYPE: ack\n\n{}\n", StatusBadRequest, true},
		{"version without minor", "AGLX/1. TCP\nTYPE: ack\n\n{}\n", StatusBadRequest, true},
		{"unknown transport", "AGLX/1.0 SCTP\nTYPE: ack\n\n{}\n", StatusBadRequest, false},
		{"truncated headers", "AGLX/1.0 TCP\nFROM: agent://a\n", StatusBadRequest, true},
		{"truncated body", "AGLX/1.0 TCP\nTYPE: ack\n\n{\"a\": [1, 2", StatusBadRequest, true},
		{"long header", "AGLX/1.0 TCP\nX-BIG: " + strings.Repeat("x", HeaderLineSizeMax) + "\n\n{}\n", StatusTooLarge, true},
		{"too many headers", "AGLX/1.0 TCP\n" + strings.Repeat("X-A: 1\n", HeaderCountMax+1) + "\n{}\n", StatusTooLarge, true},
		{"big body", "AGLX/1.0 TCP\nTYPE: ack\n\n{\"a\":\"" + strings.Repeat("x", BodySizeMaxDefault) + "\"}\n", StatusTooLarge, true},
		{"deep body", "AGLX/1.0 TCP\nTYPE: ack\n\n" + strings.Repeat("[", JSONDepthMax) + "{" + strings.Repeat("]", JSONDepthMax) + "\n", StatusBadRequest, true},
		{"not an object", "AGLX/1.0 TCP\nTYPE: ack\n\n[1]\n", StatusBadRequest, true},
		{"line break in string", "AGLX/1.0 TCP\nTYPE: ack\n\n{\"a\": \"x\n}\n", StatusBadRequest, true},
		{"invalid json, balanced", "AGLX/1.0 TCP\nTYPE: ack\n\n{\"a\": tru}\n", StatusBadRequest, false},
		{"unbalanced", "AGLX/1.0 TCP\nTYPE: ack\n\n{\"a\": [1}\n", StatusBadRequest, true},
		{"header without colon", "AGLX/1.0 TCP\nFROM agent://a\n\n{}\n", StatusBadRequest, true},
		{"no blank line before the body", "AGLX/1.0 TCP\nTYPE: ack\n{\"a\": 1}\n", StatusBadRequest, true},
		{"bad header name", "AGLX/1.0 TCP\nFR OM: agent://a\n\n{}\n", StatusBadRequest, true},
		{"duplicate TYPE", "AGLX/1.0 TCP\nTYPE: ack\ntype: error\n\n{}\n", StatusBadRequest, false},
		{"bad content length", "AGLX/1.0 TCP\nTYPE: ack\nCONTENT-LENGTH: -3\n\n{}\n", StatusBadRequest, false},
		{"content length with a plus", "AGLX/1.0 TCP\nTYPE: ack\nCONTENT-LENGTH: +2\n\n{}\n", StatusBadRequest, false},
		{"content length minus zero", "AGLX/1.0 TCP\nTYPE: ack\nCONTENT-LENGTH: -0\n\n{}\n", StatusBadRequest, false},
		{"header not utf-8", "AGLX/1.0 TCP\nTYPE: ack\nX-A: \xff\xfe\n\n{}\n", StatusBadRequest, false},
		{"bare CR in a value", "AGLX/1.0 TCP\nTYPE: ack\nX-A: 1\r2\n\n{}\n", StatusBadRequest, false},
		{"duplicate STATUS", "AGLX/1.0 TCP\nTYPE: ack\nSTATUS: 200 OK\nSTATUS: 500 No\n\n{}\n", StatusBadRequest, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(strings.NewReader(tc.in+good), DecoderOptions{})
			_, err := d.Decode()
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Decode(%.40q) = %v, want a *Error", tc.in, err)
			}
			if pe.Status != tc.status || pe.Fatal != tc.fatal {
				t.Fatalf("Decode(%.40q) = %v (fatal %v), want %d (fatal %v)", tc.in, pe, pe.Fatal, tc.status, tc.fatal)
			}
			if pe.Reason == "" {
				t.Fatal("an error without a reason")
			}
			// After a recoverable error the next frame is read from the
			// right offset; after a fatal one the decoder stays failed.
			f, err := d.Decode()
			if tc.fatal {
				if err == nil {
					t.Fatalf("after a fatal error Decode = %+v, want the error again", f)
				}
				return
			}
			if err != nil || f.Type() != "task.result" {
				t.Fatalf("after a recoverable error Decode = %+v, %v; want the next frame", f, err)
			}
		})
	}
}

// TestEncodeRefusesHeaderInjection: a value holding a line break must not
// become a header of its own.
func TestEncodeRefusesHeaderInjection(t *testing.T) {
	f := &Frame{Headers: []Header{{Name: "TO", Value: "agent://a\nTYPE: credit.adjust"}, {Name: "TYPE", Value: "ack"}}, Body: []byte("{}")}
	got, err := decodeOne(t, Encode(f))
	if err != nil || got.Type() != "ack" || len(got.Headers) != 3 {
		t.Fatalf("Decode(Encode(injected)) = %+v, %v; want TYPE ack and no extra header", got, err)
	}
}

func TestDecodeNoBody(t *testing.T) {
	in := "AGLX/1.0 TCP\nFROM: agent://a\nTO: registry://n\nTYPE: credit.balance\nCONTENT-LENGTH: 00\n\nAGLX/1.0 TCP\nTYPE: ack\n\n{}"
	d := NewDecoder(strings.NewReader(in), DecoderOptions{})
	f, err := d.Decode()
	if err != nil || f.Body != nil {
		t.Fatalf("Decode = %+v, %v; want a frame without body", f, err)
	}
	f, err = d.Decode()
	if err != nil || string(f.Body) != "{}" {
		t.Fatalf("next Decode = %+v, %v; want the ack", f, err)
	}
	if _, err := d.Decode(); !errors.Is(err, io.EOF) {
		t.Fatalf("Decode at end = %v, want io.EOF", err)
	}
}

func TestDecodeDatagram(t *testing.T) {
	b := referenceFrames(t)["14-agent.announce.aglx"]
	f, err := DecodeDatagram(b, DecoderOptions{})
	if err != nil || f.Type() != "agent.announce" || f.Transport != TransportUDP {
		t.Fatalf("DecodeDatagram = %+v, %v", f, err)
	}
	two := append(append([]byte{}, b...), b...)
	if _, err := DecodeDatagram(two, DecoderOptions{}); StatusOf(err) != StatusBadRequest {
		t.Fatalf("DecodeDatagram(two frames) = %v, want 400", err)
	}
}

// FuzzDecoder feeds arbitrary bytes to the stream decoder. It must never
// panic, never loop, and whatever it accepts must survive a re-encoding.
func FuzzDecoder(f *testing.F) {
	for _, b := range referenceFrames(f) {
		f.Add(b)
	}
	f.Add([]byte("AGLX/1.0 TCP\nTYPE: ack\nCONTENT-LENGTH: 0\n\n"))
	f.Add([]byte("AGLX/1.0 TCP\nTYPE: ack\nCONTENT-LENGTH: 0\n\n{\"a\":1}\nAGLX/1.0 TCP\nTYPE: ack\n\n{}\n"))
	f.Add([]byte("AGLX/1.0 TCP\nTYPE: ack\n\nAGLX/1.0 TCP\nTYPE: ack\n\n{}\n"))
	f.Add([]byte("AGLX/1.0 TCP\rTYPE: ack\r\r{}\rAGLX/1.0 TCP\nTYPE: ack\n\n{}\n"))
	f.Add([]byte("AGLX/1.0 TCP\r\nTYPE: ack\r\n\r\n{\"a\":\"\\\"}\"}\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder(bytes.NewReader(in), DecoderOptions{BodySizeMax: 4096})
		for i := 0; i <= len(in); i++ {
			fr, err := d.Decode()
			if err != nil {
				var pe *Error
				if errors.As(err, &pe) && !pe.Fatal {
					if pe.Reason == "" || fr == nil {
						t.Fatalf("recoverable error %v without reason or frame", pe)
					}
					continue
				}
				return
			}
			again, err := NewDecoder(bytes.NewReader(Encode(fr)), DecoderOptions{BodySizeMax: 4096}).Decode()
			if err != nil {
				t.Fatalf("Decode(Encode(%+v)) = %v", fr, err)
			}
			if !bytes.Equal(again.Body, fr.Body) || !sameHeaders(again, fr) {
				t.Fatalf("re-encoding changed the frame: %+v -> %+v", fr, again)
			}
		}
		t.Fatalf("more frames than input bytes: the decoder does not advance")
	})
}

// TestDeferJSONCheck: a decoder that leaves the grammar to Parse still
// finds the frame's end, and Parse refuses the body.
func TestDeferJSONCheck(t *testing.T) {
	in := "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.result\n\n{\"task_id\": nope}\nAGLX/1.0 TCP\nTYPE: ack\n\n{}\n"
	d := NewDecoder(strings.NewReader(in), DecoderOptions{DeferJSONCheck: true})
	f, err := d.Decode()
	if err != nil {
		t.Fatalf("Decode = %v, want the frame (grammar deferred)", err)
	}
	if _, err := Parse(f); StatusOf(err) != StatusBadRequest {
		t.Fatalf("Parse(invalid JSON) = %v, want 400", err)
	}
	if f, err := d.Decode(); err != nil || f.Type() != "ack" {
		t.Fatalf("next frame = %+v, %v; want the ack", f, err)
	}
}

// TestDecodeNamesAMissingBlankLine: a body right after the headers is
// refused with a reason that says what is missing, not that "{..." is a
// bad header name.
func TestDecodeNamesAMissingBlankLine(t *testing.T) {
	d := NewDecoder(strings.NewReader("AGLX/1.0 TCP\nTYPE: task.assign\n{\"task\": \"x\"}\n"), DecoderOptions{})
	_, err := d.Decode()
	if err == nil || !strings.Contains(err.Error(), "no blank line separates it from the headers") {
		t.Fatalf("Decode = %v; want a refusal naming the missing blank line", err)
	}
}

// TestDatagramDecodeAllocatesItsSize: every datagram got a stream's 64 KiB
// read buffer, so a flood of small spoofed datagrams cost 64 KiB of
// allocation each before any refusal. A datagram's buffer is its size.
func TestDatagramDecodeAllocatesItsSize(t *testing.T) {
	dg := []byte("AGLX/1.0 UDP\nTYPE: x\n\n{}")
	const n = 1000
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range n {
		DecodeDatagram(dg, DecoderOptions{})
	}
	runtime.ReadMemStats(&m1)
	if per := (m1.TotalAlloc - m0.TotalAlloc) / n; per > 4096 {
		t.Errorf("a %d-byte datagram allocates %d bytes to decode", len(dg), per)
	}
}
