package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DecoderOptions tunes a Decoder. The zero value uses the defaults.
type DecoderOptions struct {
	// BodySizeMax bounds one body in bytes; 0 means BodySizeMaxDefault.
	BodySizeMax int
	// DeferJSONCheck leaves the check of the body's JSON grammar to Parse,
	// for a caller that parses every frame anyway (the bridge): the body is
	// still delimited by its brackets, so framing is unaffected, and the
	// grammar is checked once instead of twice.
	DeferJSONCheck bool
}

func (o DecoderOptions) bodySizeMax() int {
	if o.BodySizeMax <= 0 {
		return BodySizeMaxDefault
	}
	if o.BodySizeMax > BodySizeMaxLimit {
		return BodySizeMaxLimit
	}
	return o.BodySizeMax
}

// readBufferSize is the Decoder's read buffer. It holds a whole header line,
// so that a line is usually sliced from the buffer rather than copied.
const readBufferSize = 64 << 10 // bytes

// Decoder splits a byte stream (one TCP connection) into frames.
//
// The body of a frame is exactly one JSON object, found by its own brackets:
// most frames carry no CONTENT-LENGTH and the one in the reference is wrong,
// so a length header cannot be trusted to find the next frame. Any error that
// leaves the position of the next frame in doubt is fatal and sticky: every
// later call returns it again, and the caller answers and hangs up.
type Decoder struct {
	r         *bufio.Reader
	bodyMax   int
	checkJSON bool
	err       error  // sticky fatal error
	scratch   []byte // where readBody gathers a body; see keep
	last      repeatedValues
	// mayFollowEmpty is set after a CONTENT-LENGTH: 0 frame returned
	// before anything after it had arrived: a '{' next is its late body.
	mayFollowEmpty bool
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader, opts DecoderOptions) *Decoder {
	return newDecoderSize(r, readBufferSize, opts)
}

// newDecoderSize is NewDecoder with a read buffer of size bytes.
func newDecoderSize(r io.Reader, size int, opts DecoderOptions) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, size), bodyMax: opts.bodySizeMax(), checkJSON: !opts.DeferJSONCheck}
}

// Buffered reports how many bytes are read from the connection but not yet
// decoded. The bridge uses it to decide when to flush replies.
func (d *Decoder) Buffered() int { return d.r.Buffered() }

// SkipBufferedBlank drops the white space already read after the last
// frame (the line end a body is followed by), without waiting for more
// input, and reports how many bytes are left buffered: bytes of something
// else, which nobody asked for if every reply expected has been read.
func (d *Decoder) SkipBufferedBlank() int {
	for d.r.Buffered() > 0 {
		b, _ := d.r.Peek(min(2, d.r.Buffered()))
		w := bodyLeadBlank(b)
		if w == 0 {
			return d.r.Buffered()
		}
		d.r.Discard(w)
	}
	return 0
}

// Probe waits for the next byte without taking it, and returns what
// the read gave: nil when a byte is there, the connection's error (io.EOF
// when the peer closed it, a timeout under a read deadline) otherwise. A
// relay asks a connection it kept whether the peer has closed it.
func (d *Decoder) Probe() error {
	_, err := d.r.Peek(1)
	return err
}

// Decode reads the next frame.
//
// It returns io.EOF when the stream ends cleanly between frames. A refusal is
// a *Error. If the error is not Fatal, the whole frame was consumed, the
// returned Frame holds what could be read of it (for the reply's addressing),
// and Decode may be called again. After a Fatal error the Decoder is done.
func (d *Decoder) Decode() (*Frame, error) {
	if d.err != nil {
		return nil, d.err
	}
	f, err := d.decode()
	var pe *Error
	if err != nil && (!errors.As(err, &pe) || pe.Fatal) {
		d.err = err
		if pe == nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	return f, err
}

// frameHeadersUsual is the room a decoded frame starts with for headers.
const frameHeadersUsual = 8 // headers

func (d *Decoder) decode() (*Frame, error) {
	mayFollowEmpty := d.mayFollowEmpty
	d.mayFollowEmpty = false
	if err := d.skipBlank(); err != nil {
		return nil, err
	}
	if mayFollowEmpty {
		if b, err := d.r.Peek(1); err == nil && b[0] == '{' {
			return d.strayBody()
		}
	}
	line, err := d.readLine()
	if err != nil {
		return nil, err
	}
	// Room for the usual headers in one allocation instead of four: FROM,
	// TO, TYPE, CONTENT-TYPE, ID and CONTENT-LENGTH, and in a reply
	// IN-REPLY-TO and STATUS. With seven, every reply the node sends had
	// its headers copied into a new slice at the eighth.
	f := &Frame{Headers: make([]Header, 0, frameHeadersUsual)}
	deferred := d.parseStartLine(f, line)
	if deferred != nil && deferred.Fatal {
		return nil, deferred
	}
	for {
		line, err := d.readLine()
		if err != nil {
			return nil, err
		}
		if isBlank(line) {
			break
		}
		if len(f.Headers) == HeaderCountMax {
			return nil, fatalf(StatusTooLarge, "more than %d header lines", HeaderCountMax)
		}
		h, herr := parseHeader(line, &d.last)
		if herr != nil && herr.Fatal {
			return nil, herr
		}
		if herr != nil && deferred == nil {
			deferred = herr
		}
		f.Headers = append(f.Headers, h)
	}
	if e := checkHeaders(f); e != nil && deferred == nil {
		deferred = e
	}
	// CONTENT-LENGTH never decides where the frame ends: what follows the
	// separator does (docs/PROTOCOL.md, "CONTENT-LENGTH never moves the next
	// frame"). The header only decides whether the frame is refused.
	cl, hasCL := f.Get(HeaderContentLength)
	n, clOK := contentLength(cl)
	var badCL *Error
	if hasCL && !clOK {
		badCL = Errorf(StatusBadRequest, "CONTENT-LENGTH %q is not a non-negative integer", cl)
	}
	var hasBody bool
	if hasCL && clOK && n == 0 {
		// The sender said the frame is complete: waiting for the next byte
		// to see would hold its reply until it sends again. Only what has
		// already arrived is looked at; a body that comes later is refused
		// on its own by the next decode.
		if hasBody = d.bodyBuffered(); !hasBody {
			d.mayFollowEmpty = true
			return f, errOrNil(deferred)
		}
	} else if hasBody, err = d.bodyFollows(); err != nil {
		return nil, err
	}
	if !hasBody {
		switch {
		case deferred != nil:
		case badCL != nil:
			deferred = badCL
		case hasCL:
			deferred = Errorf(StatusBadRequest, "CONTENT-LENGTH says %s bytes, but the frame has no body", cutDigits(strings.TrimSpace(cl)))
		default:
			deferred = Errorf(StatusBadRequest, "the frame has no body; a frame without one says CONTENT-LENGTH: 0")
		}
		return f, deferred
	}
	body, err := d.readBody()
	if err != nil {
		return nil, err
	}
	f.Body = body
	if d.checkJSON && !json.Valid(body) && deferred == nil {
		deferred = Errorf(StatusBadRequest, "the body is not valid JSON")
	}
	switch {
	case badCL != nil:
		if deferred == nil {
			deferred = badCL
		}
	case hasCL && n != len(body):
		f.LengthMismatch = true
		if n == 0 && deferred == nil {
			// A length that is merely wrong is tolerated (the reference's
			// first example has one); a frame declared empty that carries
			// a body contradicts itself about what the node should act on.
			deferred = Errorf(StatusBadRequest, "CONTENT-LENGTH: 0 says the frame has no body, but a %d-byte body follows; send the body's length, or no body", len(body))
		}
	}
	return f, errOrNil(deferred)
}

// strayBody reads a JSON object that arrived where a start line was
// expected, right after a frame that said CONTENT-LENGTH: 0 and was
// answered before the object came: it is that frame's body, late. It is
// skipped by its own brackets and refused, so the frame behind it is read
// from its start line.
func (d *Decoder) strayBody() (*Frame, error) {
	body, err := d.readBody()
	if err != nil {
		return nil, err
	}
	return &Frame{}, Errorf(StatusBadRequest,
		"a %d-byte JSON body arrived after a frame that said CONTENT-LENGTH: 0, which was taken as complete; the body was skipped", len(body))
}

// errOrNil keeps a nil *Error from becoming a non-nil error interface.
func errOrNil(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}

// skipBlank consumes white space and empty lines between frames, including
// the rest of the line the previous body ended on.
func (d *Decoder) skipBlank() error {
	for n := 0; ; n++ {
		if n > LeadingBlankSizeMax {
			return fatalf(StatusTooLarge, "more than %d bytes of white space between frames", LeadingBlankSizeMax)
		}
		b, err := d.r.Peek(1)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return io.EOF
			}
			return err
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
}

// readLine returns the next line without its LF or CRLF. The returned slice
// is valid until the next read.
func (d *Decoder) readLine() ([]byte, error) {
	line, err := d.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fatalf(StatusTooLarge, "a header line is longer than %d bytes", HeaderLineSizeMax)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fatalf(StatusBadRequest, "the frame is truncated: the input ended inside its headers")
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > HeaderLineSizeMax {
		return nil, fatalf(StatusTooLarge, "a header line is longer than %d bytes", HeaderLineSizeMax)
	}
	return line, nil
}

// parseStartLine checks "AGLX/1.0 TCP". A foreign version is fatal because its
// framing is unknown; an unknown transport word is a recoverable refusal. A
// control character (tab aside) is fatal too: a bare CR means the sender
// ends its lines with CR, so the "line" read up to the next LF holds its
// headers, its body and the start of the frame behind, and reading on would
// answer two frames with one refusal.
func (d *Decoder) parseStartLine(f *Frame, line []byte) *Error {
	for _, c := range line {
		if c < 0x20 && c != '\t' || c == 0x7F {
			return fatalf(StatusBadRequest, "the start line holds a control character (byte 0x%02X); lines end in LF or CRLF, never in a bare CR: got %s", c, quoteShort(line))
		}
	}
	// Nearly every frame starts with one of the two exact lines.
	switch string(bytes.TrimRight(line, " \t\r")) {
	case Version + " " + TransportTCP:
		f.Transport = TransportTCP
		return nil
	case Version + " " + TransportUDP:
		f.Transport = TransportUDP
		return nil
	}
	fields := strings.Fields(string(line))
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "AGLX/") {
		return fatalf(StatusBadRequest, "not an AGLX frame: expected a start line such as %q, got %s", Version+" TCP", quoteShort(line))
	}
	if fields[0] != Version {
		if !versionToken(fields[0]) {
			return fatalf(StatusBadRequest, "malformed start line: expected %q followed by a space and TCP or UDP, got %s", Version, quoteShort(line))
		}
		return fatalf(StatusVersionUnsupported, "version %s is not supported; this node speaks %s", quoteShort([]byte(fields[0])), Version)
	}
	if len(fields) != 2 {
		return Errorf(StatusBadRequest, "the start line must be %q followed by TCP or UDP, got %s", Version, quoteShort(line))
	}
	f.Transport = strings.ToUpper(fields[1])
	if f.Transport != TransportTCP && f.Transport != TransportUDP {
		return Errorf(StatusBadRequest, "unknown transport %s on the start line; expected TCP or UDP", quoteShort([]byte(fields[1])))
	}
	return nil
}

// versionToken reports whether tok names a version, "AGLX/" then digits,
// a dot and digits. Only such a token earns 505 Version Not Supported: a
// start line like "AGLX/1.0TCP" (the space left out) is a malformed 1.0
// frame, and telling its sender that 1.0 is unsupported sent them looking
// in the wrong place.
func versionToken(tok string) bool {
	v, ok := strings.CutPrefix(tok, "AGLX/")
	if !ok {
		return false
	}
	major, minor, ok := strings.Cut(v, ".")
	return ok && allDigits(major) && allDigits(minor)
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// contentLength reads a CONTENT-LENGTH value: decimal digits only, as in
// HTTP. strconv.Atoi alone also took "+5" and "-0". Any number of digits
// is a number (PROTOCOL.md: only a value that is not digits alone is
// refused): past contentLengthSaturated the value is kept at that, which
// no body reaches, so it reads as a wrong length and zeros alone, however
// many, as 0. Refused at 19 digits, a long but wrong length drew a 400
// saying it was no non-negative integer, and "CONTENT-LENGTH: 000...0"
// on a frame without a body was not taken as complete: its reply waited
// for the sender's next bytes.
func contentLength(v string) (int, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
		if n < contentLengthSaturated {
			n = min(n*10+int(v[i]-'0'), contentLengthSaturated)
		}
	}
	return n, true
}

// contentLengthSaturated is where contentLength stops counting: past any
// body a decoder takes, and small enough that counting on to it never
// overflows an int of 32 bits.
const contentLengthSaturated = BodySizeMaxLimit + 1 // bytes

// cutDigits is a CONTENT-LENGTH's digits for a reason, cut so that a
// reply never echoes much.
func cutDigits(v string) string {
	const shown = 20 // digits
	if len(v) > shown {
		return v[:shown] + "..."
	}
	return v
}

// parseHeader splits "NAME: value". A line without a colon is fatal: it is
// most likely a body whose separator line is missing. The usual header
// names come back as the package's constants, and a value equal to the
// one the same header had in last's previous frame as that string, so a
// connection's frames, which repeat FROM, TO, TYPE and CONTENT-TYPE, do
// not each allocate them again. last may be nil.
func parseHeader(line []byte, last *repeatedValues) (Header, *Error) {
	if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return Header{}, fatalf(StatusBadRequest, "line %s looks like the body, but no blank line separates it from the headers", quoteShort(line))
	}
	i := bytes.IndexByte(line, ':')
	if i <= 0 {
		return Header{}, fatalf(StatusBadRequest, "header line %s is not of the form NAME: value", quoteShort(line))
	}
	name, slot := knownHeaderName(line[:i])
	if slot < 0 {
		name = string(line[:i])
	}
	for j := 0; j < len(name); j++ {
		if !isTokenByte(name[j]) {
			return Header{}, fatalf(StatusBadRequest, "header name %s may hold only letters, digits, '-' and '_'", quoteShort(line[:i]))
		}
	}
	value := line[i+1:]
	for _, c := range value {
		if c < 0x20 && c != '\t' || c == 0x7F {
			// A stray CR or another control character inside a line is how
			// header smuggling starts; the line is whole, so refuse only the
			// frame.
			return Header{Name: name, Value: strings.Map(printable, strings.TrimSpace(string(value)))},
				Errorf(StatusBadRequest, "header %s holds a control character (byte 0x%02X)", name, c)
		}
	}
	if !utf8.Valid(value) {
		// The line is whole, so the frame's end is still known: refuse the
		// frame, keep the connection. The value is kept with its bad bytes
		// replaced, for the log line.
		return Header{Name: name, Value: strings.ToValidUTF8(strings.TrimSpace(string(value)), "\uFFFD")},
			Errorf(StatusBadRequest, "header %s is not valid UTF-8", name)
	}
	value = bytes.TrimSpace(value)
	if len(name)+2+len(value) > HeaderLineSizeMax {
		// The node writes "NAME: value"; a line that fits only without the
		// space would come back too long for any decoder, its own included.
		return Header{Name: name, Value: strings.ToValidUTF8(string(value[:HeaderLineSizeMax/2]), "")},
			Errorf(StatusTooLarge, "header %s is longer than %d bytes once written as NAME: value", name, HeaderLineSizeMax)
	}
	return Header{Name: name, Value: last.value(slot, value)}, nil
}

// repeatedValues holds, per header that tends to repeat from frame to
// frame on one connection, the value it had last.
type repeatedValues [repeatedHeaders]string

// The headers whose values repeatedValues keeps: the first entries of
// knownHeaders.
const repeatedHeaders = 4

// knownHeaders are the header names parseHeader hands out as constants.
var knownHeaders = [...]string{HeaderFrom, HeaderTo, HeaderType, HeaderContentType,
	HeaderContentLength, HeaderID, HeaderInReplyTo, HeaderStatus, HeaderCredits}

// knownHeaderName returns the constant for a usual header name and its
// index in knownHeaders, or -1.
func knownHeaderName(b []byte) (string, int) {
	for i, h := range knownHeaders {
		if string(b) == h {
			return h, i
		}
	}
	return "", -1
}

// value returns b as a string: the one kept for slot when equal, else a
// new one, then kept.
func (v *repeatedValues) value(slot int, b []byte) string {
	if v == nil || slot < 0 || slot >= repeatedHeaders {
		return string(b)
	}
	if v[slot] == string(b) {
		return v[slot]
	}
	v[slot] = string(b)
	return v[slot]
}

// printable replaces control characters, for a refused header's log line.
func printable(r rune) rune {
	if r < 0x20 && r != '\t' || r == 0x7F {
		return '?'
	}
	return r
}

func isTokenByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// singleHeaders may appear at most once: two values would leave it open
// which one the node acted on.
var singleHeaders = []string{HeaderFrom, HeaderTo, HeaderType, HeaderContentLength, HeaderContentType, HeaderID, HeaderCredits, HeaderInReplyTo, HeaderStatus}

func checkHeaders(f *Frame) *Error {
	n := 0
	for _, h := range f.Headers {
		if !strings.EqualFold(h.Name, HeaderContentLength) && !strings.EqualFold(h.Name, HeaderRelayedBy) {
			n++
		}
	}
	if n > HeaderCountKeptMax {
		return Errorf(StatusTooLarge, "%d header lines besides CONTENT-LENGTH and RELAYED-BY; at most %d, so that the frame still fits %d lines when the node writes it on (with its CONTENT-LENGTH, and a relay's RELAYED-BY)",
			n, HeaderCountKeptMax, HeaderCountMax)
	}
	for _, name := range singleHeaders {
		n := 0
		for _, h := range f.Headers {
			if strings.EqualFold(h.Name, name) {
				n++
			}
		}
		if n > 1 {
			return Errorf(StatusBadRequest, "header %s appears %d times; it may appear once", name, n)
		}
	}
	return nil
}

// isBlank reports whether a line holds only white space: space, tab, or
// NO-BREAK SPACE, as on the separator lines of the reference.
func isBlank(line []byte) bool {
	for len(line) > 0 {
		switch {
		case line[0] == ' ' || line[0] == '\t' || line[0] == '\r':
			line = line[1:]
		case len(line) >= 2 && line[0] == 0xC2 && line[1] == 0xA0:
			line = line[2:]
		default:
			return false
		}
	}
	return true
}

// quoteShort quotes b for an error reason, cut (at a character boundary)
// so a reply never echoes much.
func quoteShort(b []byte) string {
	const max = 40
	if len(b) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return strconv.Quote(string(b[:cut])) + "..."
	}
	return strconv.Quote(string(b))
}
