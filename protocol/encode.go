package protocol

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// AppendFrame appends the wire form of f to dst and returns the extended
// slice. It writes the headers in order, drops any CONTENT-LENGTH it was given
// and writes a correct one, so that what the node sends is never
// self-contradictory. Lines end in LF; the separator line is empty.
func AppendFrame(dst []byte, f *Frame) []byte { return appendFrame(dst, f, true) }

// AppendFrameAsGiven appends f to dst with its headers as they stand: in
// order, repeats and spelling kept, CONTENT-LENGTH written as given or
// not at all, and none added. It is for showing a frame as it was
// received (aglx tail prints stored events with it); AppendFrame, which
// the node sends with, writes its own CONTENT-LENGTH in place of the
// sender's, and a tail that used it showed a sender's wrong 112 as 133
// and added a length to frames that had none. Control characters are
// written as spaces, as AppendFrame does, so that no header can forge a
// line; the decoder refuses them, so a frame the node stored is written
// byte for byte. The body ends with a newline, as AppendFrame's does.
func AppendFrameAsGiven(dst []byte, f *Frame) []byte { return appendFrame(dst, f, false) }

// appendFrame writes f for AppendFrame (ownLength: the sender's
// CONTENT-LENGTH dropped and a correct one written last) and
// AppendFrameAsGiven (the headers exactly as they stand).
func appendFrame(dst []byte, f *Frame, ownLength bool) []byte {
	transport := f.Transport
	if transport == "" {
		transport = TransportTCP
	}
	dst = append(dst, Version...)
	dst = append(dst, ' ')
	dst = append(dst, transport...)
	dst = append(dst, '\n')
	for _, h := range f.Headers {
		if ownLength && equalFoldASCII(h.Name, HeaderContentLength) {
			continue
		}
		dst = appendLine(dst, h.Name)
		dst = append(dst, ": "...)
		dst = appendLine(dst, h.Value)
		dst = append(dst, '\n')
	}
	if ownLength {
		dst = append(dst, HeaderContentLength...)
		dst = append(dst, ": "...)
		dst = strconv.AppendInt(dst, int64(len(f.Body)), 10)
		dst = append(dst, '\n')
	}
	dst = append(dst, '\n')
	dst = append(dst, f.Body...)
	if len(f.Body) > 0 {
		dst = append(dst, '\n')
	}
	return dst
}

// appendLine appends s with every control character (CR and LF above
// all, but any the decoder refuses) written as a space and invalid UTF-8
// as U+FFFD: a header built from untrusted text must never end its line
// early and inject a header (or a body) of its own, and what the node
// writes must be what its own decoder reads.
func appendLine(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\t' || c == 0x7F {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}

// Encode returns the wire form of f.
func Encode(f *Frame) []byte { return AppendFrame(nil, f) }

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
