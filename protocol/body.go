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
		return nil, err
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

// skipBodyLead skips the white space between the separator line and the body.
func (d *Decoder) skipBodyLead() error {
	for n := 0; n <= LeadingBlankSizeMax; n++ {
		b, err := d.r.Peek(1)
		if err != nil {
			return truncated(err)
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			d.r.Discard(1)
			continue
		case 0xC2:
			if b2, err := d.r.Peek(2); err == nil && b2[1] == 0xA0 {
				d.r.Discard(2)
				continue
			}
		}
		return nil
	}
	return fatalf(StatusTooLarge, "more than %d bytes of white space before the body", LeadingBlankSizeMax)
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fatalf(StatusBadRequest, "the frame is truncated: the input ended inside its body")
	}
	return err
}
