package protocol

import (
	"errors"
	"io"
)

// readBody reads one JSON object and returns its bytes. It finds the end by
// counting brackets outside strings; the full grammar is checked afterwards
// by the caller. A raw line break inside a string is refused on the spot:
// JSON forbids it, and it is the surest sign that a string never ends and the
// scan would otherwise swallow the frames behind it.
func (d *Decoder) readBody() ([]byte, error) {
	if err := d.skipBodyLead(); err != nil {
		return nil, truncated(err)
	}
	first, err := d.r.Peek(1)
	if err != nil {
		return nil, truncated(err)
	}
	if first[0] != '{' {
		return nil, fatalf(StatusBadRequest, "the body must be one JSON object starting with '{', got %s", quoteShort(first))
	}
	var (
		body     = d.scratch[:0]
		stack    [JSONDepthMax]byte
		depth    int
		inString bool
		escaped  bool
	)
	for {
		chunk, err := d.r.Peek(1)
		if err != nil {
			return nil, truncated(err)
		}
		// Scan what is buffered in one go rather than a byte per call.
		if n := d.r.Buffered(); n > 1 {
			chunk, _ = d.r.Peek(n)
		}
		for i, c := range chunk {
			if len(body)+i >= d.bodyMax {
				return nil, fatalf(StatusTooLarge, "the body is larger than %d bytes", d.bodyMax)
			}
			if inString {
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				case c == '\n' || c == '\r':
					return nil, fatalf(StatusBadRequest, "invalid JSON: a line break inside a string (unterminated string?)")
				}
				continue
			}
			switch c {
			case '"':
				inString = true
			case '{', '[':
				if depth == JSONDepthMax {
					return nil, fatalf(StatusBadRequest, "invalid JSON: nested deeper than %d levels", JSONDepthMax)
				}
				stack[depth] = c
				depth++
			case '}', ']':
				open := byte('{')
				if c == ']' {
					open = '['
				}
				if depth == 0 || stack[depth-1] != open {
					return nil, fatalf(StatusBadRequest, "invalid JSON: unbalanced %q", c)
				}
				depth--
				if depth == 0 {
					body = append(body, chunk[:i+1]...)
					d.r.Discard(i + 1)
					return d.keep(body), nil
				}
			}
		}
		body = append(body, chunk...)
		d.r.Discard(len(chunk))
	}
}

// keep returns a body of exactly the size read, and keeps the buffer it
// was gathered in for the next frame if it is small: a frame is usually a
// few hundred bytes, and allocating a generous buffer per frame cost more
// memory traffic than the copy.
func (d *Decoder) keep(body []byte) []byte {
	out := append([]byte(nil), body...)
	if cap(body) <= scratchSizeMax {
		d.scratch = body[:0]
	}
	return out
}

// scratchSizeMax bounds the body buffer a Decoder keeps between frames, so
// that one large body does not pin its buffer for the connection's life.
const scratchSizeMax = 8 << 10 // bytes

// bodyFollows skips the white space after the separator line and reports
// whether a body comes next: '{' starts one; a start line ("AGLX/") or the
// end of the input means the frame has none, and the next frame starts
// there. It waits for the bytes it needs. Anything else is garbage where a
// body should be, and fatal.
func (d *Decoder) bodyFollows() (bool, error) {
	if err := d.skipBodyLead(); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, err
	}
	b, err := d.r.Peek(1)
	if err != nil {
		return false, err
	}
	if b[0] == '{' {
		return true, nil
	}
	// Five bytes are waited for only when they can start a start line, so
	// a short body at the end of what the peer has sent is not held up.
	if b[0] == startLinePrefix[0] {
		b, err = d.r.Peek(len(startLinePrefix))
		if string(b) == startLinePrefix {
			return false, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
	}
	return false, fatalf(StatusBadRequest, "the body must be one JSON object starting with '{', got %s", quoteShort(b))
}

// startLinePrefix is how every start line begins, of any version.
const startLinePrefix = "AGLX/"

// bodyBuffered reports whether the first byte past white space among the
// bytes already read is '{'. It never waits for the connection, so it
// answers false when nothing but white space has arrived yet.
func (d *Decoder) bodyBuffered() bool {
	b, _ := d.r.Peek(d.r.Buffered())
	for len(b) > 0 {
		w := bodyLeadBlank(b)
		if w == 0 {
			return b[0] == '{'
		}
		b = b[w:]
	}
	return false
}

// bodyLeadBlank is the width of the white space b starts with, as it may
// come between the separator and the body (space, tab, CR, LF, U+00A0),
// or 0. A lone 0xC2 at b's end is not known to be white space yet.
func bodyLeadBlank(b []byte) int {
	switch b[0] {
	case ' ', '\t', '\r', '\n':
		return 1
	case 0xC2:
		if len(b) > 1 && b[1] == 0xA0 {
			return 2
		}
	}
	return 0
}

// skipBodyLead skips the white space between the separator line and the
// body. At the end of the input it returns io.EOF, which bodyFollows reads
// as "no body".
func (d *Decoder) skipBodyLead() error {
	for n := 0; n <= LeadingBlankSizeMax; n++ {
		b, err := d.r.Peek(1)
		if err != nil {
			return err
		}
		if b[0] == 0xC2 {
			if b2, err := d.r.Peek(2); err == nil {
				b = b2
			}
		}
		w := bodyLeadBlank(b)
		if w == 0 {
			return nil
		}
		d.r.Discard(w)
	}
	return fatalf(StatusTooLarge, "more than %d bytes of white space before the body", LeadingBlankSizeMax)
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fatalf(StatusBadRequest, "the frame is truncated: the input ended inside its body")
	}
	return err
}
