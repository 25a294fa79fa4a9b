package protocol

import (
	"bytes"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Canonical returns the canonical form of a JSON object body with its
// top-level "signature" member removed: the bytes a signature covers
// (AGLX-NOTES.md section 4).
//
// Signer and verifier must agree on these bytes without agreeing on how the
// body was laid out, so objects, strings and white space follow RFC 8785
// (JCS): members sorted by key in UTF-16 code units, no insignificant white
// space, strings escaped as JCS escapes them. Numbers are the one exception:
// each is written with the exact text it had in the input. JCS would pass
// them through float64, so that "amount": 3 and "amount": 3.0 (or two
// amounts beyond float64's precision) would share one signature while the
// ledger reads them as different decimals.
//
// Only the top-level "signature" member is removed; a nested one is data
// like any other. The body is refused (400) when it is not exactly one JSON
// object, holds invalid UTF-8 or a lone surrogate escape, names a member
// twice in one object (two readers could pick different ones), or nests
// deeper than JSONDepthMax. A body larger than BodySizeMaxLimit is refused
// with 413.
func Canonical(body []byte) ([]byte, error) {
	canon, _, e := parseSigned(nil, body)
	if e != nil {
		return nil, e
	}
	return canon, nil
}

// parseSigned appends body's canonical form to dst, so that a caller can
// put the signing input's headers in front without copying the body again,
// and reports the body's signature member.
func parseSigned(dst, body []byte) ([]byte, signedBody, *Error) {
	if len(body) > BodySizeMaxLimit {
		return nil, signedBody{}, Errorf(StatusTooLarge, "the body is larger than %d bytes", BodySizeMaxLimit)
	}
	if dst == nil {
		dst = make([]byte, 0, len(body))
	}
	p := jcsParsers.Get().(*jcsParser)
	defer p.release()
	p.in, p.out = body, dst
	p.skipSpace()
	if p.pos >= len(p.in) || p.in[p.pos] != '{' {
		return nil, p.info, p.fail("the body must be one JSON object")
	}
	if e := p.object(0); e != nil {
		return nil, p.info, e
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.info, p.fail("data after the JSON object")
	}
	return p.out, p.info, nil
}

// jcsParsers keep parsers between checks, with the room they grew for
// members and sorting: a check then allocates only its output.
var jcsParsers = sync.Pool{New: func() any { return new(jcsParser) }}

// jcsScratchMax is the most scratch room, in bytes, a parser keeps for the
// next body, so that one large body does not pin its buffers in the pool.
const jcsScratchMax = 64 << 10 // bytes

func (p *jcsParser) release() {
	members, sorted := p.members[:0], p.sorted[:0]
	if cap(sorted) > jcsScratchMax {
		sorted = nil
	}
	if cap(members)*int(unsafe.Sizeof(canonMember{})) > jcsScratchMax {
		members = nil
	}
	clear(members[:cap(members)]) // the keys point into the body
	*p = jcsParser{members: members, sorted: sorted}
	jcsParsers.Put(p)
}

// jcsParser is a recursive-descent JSON parser that writes the canonical
// form while it reads. A hand-written parser rather than encoding/json,
// because encoding/json silently replaces invalid UTF-8 and lone surrogates
// with U+FFFD, which would let two different bodies share one signature.
type jcsParser struct {
	in   []byte
	pos  int
	out  []byte
	info signedBody // filled in for the top-level object only
	// members holds the members of every object being parsed: an object's
	// own start where it began, and nested objects push theirs above them
	// and pop them when they end. One slice for the whole body, kept with
	// the parser in jcsParsers, instead of a slice and a map of seen names
	// per object: these were most of a check's allocations.
	members []canonMember
	sorted  []byte // one object's members in order, before they are copied back
}

func (p *jcsParser) fail(what string) *Error {
	return Errorf(StatusBadRequest, "the body is not valid JSON for signing: %s at byte %d", what, p.pos)
}

func (p *jcsParser) skipSpace() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one value at nesting depth, the number of objects and arrays
// around it.
func (p *jcsParser) value(depth int) *Error {
	if p.pos >= len(p.in) {
		return p.fail("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		_, e := p.str(false)
		return e
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	}
	return p.fail("unexpected character")
}

// canonMember is one member's canonical bytes in p.out, with its decoded
// key, which compareUTF16 sorts by. The key is the input's own bytes
// unless it holds an escape.
type canonMember struct {
	key        []byte
	start, end int
}

// compareUTF16 orders two keys as JCS does, by UTF-16 code units. UTF-8
// bytes order strings by code point, and so do UTF-16 code units as long as
// no rune is at or above U+E000 (from U+10000 on, UTF-16 writes surrogates,
// which sort below U+E000-U+FFFF): keys below that, nearly all keys, are
// compared as they are, without encoding them.
func compareUTF16(a, b []byte) int {
	if below(a) && below(b) {
		return bytes.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(string(a))), utf16.Encode([]rune(string(b))))
}

// below reports whether every rune of s is below U+E000: every byte of its
// UTF-8 below 0xEE (0xEE is the lead byte of U+E000).
func below(s []byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xEE {
			return false
		}
	}
	return true
}

// object parses an object at p.pos. Its members are written one after the
// other as they come, then rewritten once in sorted order with commas. A
// name that appears twice is found once they are sorted, side by side.
func (p *jcsParser) object(depth int) *Error {
	if depth >= JSONDepthMax {
		return p.fail("objects and arrays nested deeper than the limit")
	}
	p.pos++ // '{'
	start := len(p.out)
	base := len(p.members)
	p.skipSpace()
	for more := p.pos >= len(p.in) || p.in[p.pos] != '}'; more; {
		if e := p.member(depth); e != nil {
			return e
		}
		p.skipSpace()
		switch {
		case p.pos >= len(p.in):
			return p.fail("unexpected end of input in an object")
		case p.in[p.pos] == ',':
			p.pos++
		case p.in[p.pos] == '}':
			more = false
		default:
			return p.fail("expected ',' or '}' after a member")
		}
	}
	if depth == 0 {
		p.info.close = p.pos
	}
	p.pos++ // '}'
	// JCS sorts by key as UTF-16 code units, so that signers in languages
	// whose strings are UTF-16 (JavaScript, Java, C#) sort the same way.
	members := p.members[base:]
	slices.SortFunc(members, func(a, b canonMember) int { return compareUTF16(a.key, b.key) })
	sorted := append(p.sorted[:0], '{')
	for i, m := range members {
		if i > 0 {
			if compareUTF16(members[i-1].key, m.key) == 0 {
				return twice(m.key)
			}
			sorted = append(sorted, ',')
		}
		sorted = append(sorted, p.out[m.start:m.end]...)
	}
	sorted = append(sorted, '}')
	p.out = append(p.out[:start], sorted...)
	p.sorted = sorted
	p.members = p.members[:base]
	return nil
}

// twice is the refusal of an object that names a member twice: two readers
// could take different ones.
func twice(key []byte) *Error {
	return Errorf(StatusBadRequest, "member %s appears twice in one object; a member may appear only once", sigQuote(string(key)))
}

// member parses one member of an object at depth and pushes it on
// p.members, or, for the top-level signature, records it in p.info and
// drops it.
func (p *jcsParser) member(depth int) *Error {
	span := memberSpan{lead: p.pos}
	p.skipSpace()
	if p.pos >= len(p.in) || p.in[p.pos] != '"' {
		return p.fail("expected a member name")
	}
	span.key = p.pos
	mStart := len(p.out)
	key, e := p.str(true)
	if e != nil {
		return e
	}
	span.keyEnd = p.pos
	isSig := depth == 0 && string(key) == sigMemberName
	if isSig && p.info.sigFound {
		return twice(key)
	}
	p.skipSpace()
	if p.pos >= len(p.in) || p.in[p.pos] != ':' {
		return p.fail("expected ':' after a member name")
	}
	p.pos++
	p.out = append(p.out, ':')
	p.skipSpace()
	span.val = p.pos
	if isSig && p.pos < len(p.in) && p.in[p.pos] == '"' {
		var v []byte
		v, e = p.str(true)
		p.info.sigValue = string(v)
		p.info.sigIsString = true
	} else {
		e = p.value(depth + 1)
	}
	if e != nil {
		return e
	}
	span.valEnd = p.pos
	if depth == 0 {
		p.info.members++
		p.info.last = span
	}
	if isSig {
		p.info.sigFound, p.info.sig = true, span
		p.out = p.out[:mStart] // signed bytes never include the signature
		return nil
	}
	p.members = append(p.members, canonMember{key, mStart, len(p.out)})
	return nil
}

func (p *jcsParser) array(depth int) *Error {
	if depth >= JSONDepthMax {
		return p.fail("objects and arrays nested deeper than the limit")
	}
	p.pos++ // '['
	p.out = append(p.out, '[')
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return nil
	}
	for {
		p.skipSpace()
		if e := p.value(depth + 1); e != nil {
			return e
		}
		p.skipSpace()
		if p.pos >= len(p.in) {
			return p.fail("unexpected end of input in an array")
		}
		c := p.in[p.pos]
		p.pos++
		p.out = append(p.out, c)
		switch c {
		case ',':
		case ']':
			return nil
		default:
			p.pos--
			return p.fail("expected ',' or ']' after an array element")
		}
	}
}

// number copies a number's literal text after checking it against the JSON
// grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jcsParser) number() *Error {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.in) && p.in[p.pos] == '0':
		p.pos++
	case p.digits() == 0:
		return p.fail("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return p.fail("invalid number: no digit after '.'")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return p.fail("invalid number: no digit in the exponent")
		}
	}
	p.out = append(p.out, p.in[start:p.pos]...)
	return nil
}

func (p *jcsParser) digits() int {
	n := 0
	for p.pos < len(p.in) && '0' <= p.in[p.pos] && p.in[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}

func (p *jcsParser) literal(word string) *Error {
	if len(p.in)-p.pos < len(word) || string(p.in[p.pos:p.pos+len(word)]) != word {
		return p.fail("unexpected character")
	}
	p.pos += len(word)
	p.out = append(p.out, word...)
	return nil
}

// str parses a string at p.pos, writes it JCS-escaped, and returns its
// decoded text when decode is set (member names, the signature): the
// input's own bytes when the string holds no escape, so that most names
// cost no allocation.
func (p *jcsParser) str(decode bool) ([]byte, *Error) {
	p.pos++ // '"'
	p.out = append(p.out, '"')
	begin := p.pos
	// text is the decoded string, built only once an escape makes it
	// differ from the input: otherwise the input's bytes are the string
	// (valid UTF-8 decodes and encodes back to the same bytes).
	var text []byte
	escaped := false
	for {
		// Plain ASCII stands for itself, decoded and in the canonical form:
		// copy each run of it at once.
		run := p.pos
		for p.pos < len(p.in) {
			if c := p.in[p.pos]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
				break
			}
			p.pos++
		}
		if p.pos > run {
			p.out = append(p.out, p.in[run:p.pos]...)
			if escaped {
				text = append(text, p.in[run:p.pos]...)
			}
		}
		if p.pos >= len(p.in) {
			return nil, p.fail("unterminated string")
		}
		c := p.in[p.pos]
		var r rune
		switch {
		case c == '"':
			end := p.pos
			p.pos++
			p.out = append(p.out, '"')
			switch {
			case !decode:
				return nil, nil
			case escaped:
				return text, nil
			}
			return p.in[begin:end:end], nil
		case c < 0x20:
			return nil, p.fail("control character in a string")
		case c == '\\':
			if decode && !escaped {
				escaped = true
				text = append(text, p.in[begin:p.pos]...)
			}
			var e *Error
			if r, e = p.escape(); e != nil {
				return nil, e
			}
		case c < utf8.RuneSelf:
			r = rune(c)
			p.pos++
		default:
			var size int
			r, size = utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return nil, p.fail("invalid UTF-8 in a string")
			}
			p.pos += size
		}
		p.out = appendJCSRune(p.out, r)
		if escaped {
			text = utf8.AppendRune(text, r)
		}
	}
}

// escape decodes one escape sequence at p.pos. A \u escape of a surrogate
// must be one half of a pair: I-JSON (RFC 7493), which JCS requires, has no
// room for a lone surrogate, and it has no UTF-8 form to sign.
func (p *jcsParser) escape() (rune, *Error) {
	if p.pos+1 >= len(p.in) {
		return 0, p.fail("unterminated string")
	}
	c := p.in[p.pos+1]
	p.pos += 2
	if r, ok := jsonUnescapes[c]; ok {
		return r, nil
	}
	if c != 'u' {
		p.pos--
		return 0, p.fail("invalid escape in a string")
	}
	r, ok := p.hex4()
	if !ok {
		return 0, p.fail(`invalid \u escape`)
	}
	if !utf16.IsSurrogate(r) {
		return r, nil
	}
	if r >= 0xDC00 || p.pos+1 >= len(p.in) || p.in[p.pos] != '\\' || p.in[p.pos+1] != 'u' {
		return 0, p.fail("lone UTF-16 surrogate escape")
	}
	p.pos += 2
	low, ok := p.hex4()
	if !ok || low < 0xDC00 || low > 0xDFFF {
		return 0, p.fail("lone UTF-16 surrogate escape")
	}
	return utf16.DecodeRune(r, low), nil
}

func (p *jcsParser) hex4() (rune, bool) {
	if len(p.in)-p.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// appendJCSRune writes r as RFC 8785 section 3.2.2.2 does: '"' and '\'
// escaped, control characters as \b \t \n \f \r or \u00xx in lower case,
// everything else as its UTF-8 bytes.
func appendJCSRune(dst []byte, r rune) []byte {
	switch {
	case r == '"' || r == '\\':
		return append(dst, '\\', byte(r))
	case r >= 0x20:
		return utf8.AppendRune(dst, r)
	case jcsShortEscapes[r] != 0:
		return append(dst, '\\', jcsShortEscapes[r])
	}
	const hexDigits = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
}

// jcsShortEscapes are the control characters with a two-character escape.
var jcsShortEscapes = [0x20]byte{'\b': 'b', '\t': 't', '\n': 'n', '\f': 'f', '\r': 'r'}

// jsonUnescapes maps the letter after a backslash to what it stands for,
// \u excepted.
var jsonUnescapes = map[byte]rune{
	'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}
