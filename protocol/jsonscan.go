package protocol

import (
	"bytes"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reads a body for Parse in one pass: it checks the JSON grammar,
// refuses a member name given twice in one object and nesting deeper than
// JSONDepthMax, and hands back the members of the top-level object, so that
// the payload's fields can be decoded from their own bytes without another
// parse. It replaces a walk with encoding/json's Token API followed by
// reflect-based json.Unmarshal per member, which together were a quarter of
// the node's CPU on ingest.
//
// Each refusal is the one that walk gave, found at the same place: the
// first fault in document order wins, a name is compared after its escapes
// are decoded ("\u0061mount" is "amount"), and a name holding invalid UTF-8
// is read as encoding/json reads it, with U+FFFD in place of each bad byte.
// message_test.go holds Parse to those texts, and parse_oracle_test.go to
// the old walk itself, kept there as an oracle.

// member is one member of a JSON object: its name, escapes decoded, and the
// bytes of its value, white space excluded. Both alias the body unless the
// name had to be decoded.
type member struct {
	name  []byte
	value []byte
}

// memberNamesScanMax bounds the members of one object whose names are
// checked for duplicates by comparing each with those before it. Beyond it
// the check goes through a map, so that an object of many members costs
// linear time rather than quadratic.
const memberNamesScanMax = 16 // members

// bodyScanner is the state of one pass over a body. Its buffers are kept
// between frames in a pool rather than on the stack: the recursive scan
// stores into them through the pointer, which makes Go's escape analysis
// move any stack array they start from to the heap, on every frame.
type bodyScanner struct {
	in  []byte
	pos int
	// names holds the member names of every object being read, outermost
	// first; each object drops its own when it closes.
	names [][]byte
	// top collects the members of the top-level object.
	top []member
	// path is the way from the top to the value being read, a step per
	// object or array around it. It is spelled out only when a refusal names
	// the value, so a body that is accepted builds no path string.
	path []pathStep
}

// pathStep is one step of a path: a member name, or an array position.
type pathStep struct {
	name  []byte
	index int
	elem  bool
}

// pathString spells a path as refusals give it: "entries[1].agent_uri".
func pathString(steps []pathStep) string {
	path := ""
	for _, st := range steps {
		if st.elem {
			path += "[" + strconv.Itoa(st.index) + "]"
		} else {
			path = joinPath(path, string(st.name))
		}
	}
	return path
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

var scanners = sync.Pool{New: func() any { return new(bodyScanner) }}

// scanBufferMax bounds the entries a pooled scanner keeps room for, so that
// one large body does not hold memory in the pool for good.
const scanBufferMax = 256 // entries

// scanBody checks the whole body before anything reads it. It refuses an
// object that names one member twice: encoding/json would keep the last of
// two "amount" members where another reader, or the person checking a
// signature, may take the first, and a message that means two things is
// refused. It also bounds the nesting, for a frame that did not come
// through the Decoder.
//
// It returns a scanner whose top holds the members of the body's top-level
// object, and whether the body is an object at all; one that is not (an
// array, a string, null) is left for the caller to refuse. The caller
// releases the scanner when done with the members.
func scanBody(body []byte) (*bodyScanner, bool, *Error) {
	s := scanners.Get().(*bodyScanner)
	s.in, s.pos = body, 0
	s.skipSpace()
	isObject := s.pos < len(s.in) && s.in[s.pos] == '{'
	if e := s.value(0); e != nil {
		return s, false, e
	}
	s.skipSpace()
	if s.pos != len(s.in) {
		return s, false, Errorf(StatusBadRequest, "the body holds more than one JSON value")
	}
	return s, isObject, nil
}

// release returns s to the pool. Its buffers are cleared to their capacity
// first: they hold slices of the body, which the pool must not keep alive.
func (s *bodyScanner) release() {
	s.in = nil
	s.names = clearBuffer(s.names)
	s.top = clearBuffer(s.top)
	s.path = clearBuffer(s.path)
	scanners.Put(s)
}

func clearBuffer[T any](b []T) []T {
	if cap(b) > scanBufferMax {
		return nil
	}
	clear(b[:cap(b)])
	return b[:0]
}

func errNotJSON() *Error { return Errorf(StatusBadRequest, "the body is not valid JSON") }

func (s *bodyScanner) skipSpace() {
	for s.pos < len(s.in) {
		switch s.in[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value reads the value at s.pos, at depth objects and arrays below the
// top.
func (s *bodyScanner) value(depth int) *Error {
	s.skipSpace()
	if s.pos >= len(s.in) {
		return errNotJSON()
	}
	switch c := s.in[s.pos]; {
	case c == '{' || c == '[':
		if depth == JSONDepthMax {
			return Errorf(StatusBadRequest, "the body is nested deeper than %d levels", JSONDepthMax)
		}
		if c == '{' {
			return s.object(depth)
		}
		return s.array(depth)
	case c == '"':
		if _, _, ok := s.str(); !ok {
			return errNotJSON()
		}
	case c == '-' || '0' <= c && c <= '9':
		if !s.number() {
			return errNotJSON()
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return errNotJSON()
	}
	return nil
}

func (s *bodyScanner) object(depth int) *Error {
	s.pos++ // '{'
	first := len(s.names)
	step := len(s.path)
	var seen map[string]struct{} // once the object has many members
	s.skipSpace()
	if s.pos < len(s.in) && s.in[s.pos] == '}' {
		s.pos++
		return nil
	}
	s.path = append(s.path, pathStep{})
	for {
		s.skipSpace()
		if s.pos >= len(s.in) || s.in[s.pos] != '"' {
			return errNotJSON()
		}
		content, plain, ok := s.str()
		if !ok {
			return errNotJSON()
		}
		name := content
		if !plain {
			name = unquoteJSON(content)
		}
		s.path[step] = pathStep{name: name}
		if s.named(first, &seen, name) {
			return Errorf(StatusBadRequest, "member %s appears twice; a member may appear only once",
				quoteValue(pathString(s.path)))
		}
		s.skipSpace()
		if s.pos >= len(s.in) || s.in[s.pos] != ':' {
			return errNotJSON()
		}
		s.pos++
		s.skipSpace()
		start := s.pos
		if e := s.value(depth + 1); e != nil {
			return e
		}
		if depth == 0 {
			s.top = append(s.top, member{name, s.in[start:s.pos]})
		}
		s.skipSpace()
		if s.pos >= len(s.in) {
			return errNotJSON()
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.names = s.names[:first]
			s.path = s.path[:step]
			return nil
		default:
			return errNotJSON()
		}
	}
}

// named records name as a member of the object whose names start at
// s.names[first], and reports whether the object already had one so named.
func (s *bodyScanner) named(first int, seen *map[string]struct{}, name []byte) bool {
	if *seen != nil {
		if _, dup := (*seen)[string(name)]; dup {
			return true
		}
		(*seen)[string(name)] = struct{}{}
		return false
	}
	earlier := s.names[first:]
	for _, n := range earlier {
		if bytes.Equal(n, name) {
			return true
		}
	}
	s.names = append(s.names, name)
	if len(earlier)+1 == memberNamesScanMax {
		*seen = make(map[string]struct{}, 2*memberNamesScanMax)
		for _, n := range s.names[first:] {
			(*seen)[string(n)] = struct{}{}
		}
	}
	return false
}

func (s *bodyScanner) array(depth int) *Error {
	s.pos++ // '['
	s.skipSpace()
	if s.pos < len(s.in) && s.in[s.pos] == ']' {
		s.pos++
		return nil
	}
	step := len(s.path)
	s.path = append(s.path, pathStep{elem: true})
	for i := 0; ; i++ {
		s.path[step].index = i
		if e := s.value(depth + 1); e != nil {
			return e
		}
		s.skipSpace()
		if s.pos >= len(s.in) {
			return errNotJSON()
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.path = s.path[:step]
			return nil
		default:
			return errNotJSON()
		}
	}
}

// plainByte marks the bytes a string may hold that need no decoding:
// printable ASCII other than '"' and '\'.
var plainByte = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads the string at s.pos and returns what is between its quotes.
// plain reports that this needs no decoding: no escape and only ASCII. Bytes
// that are not UTF-8 are let through, as encoding/json lets them through;
// decoding replaces them.
func (s *bodyScanner) str() (content []byte, plain, ok bool) {
	s.pos++ // '"'
	start := s.pos
	plain = true
	for {
		for s.pos < len(s.in) && plainByte[s.in[s.pos]] {
			s.pos++
		}
		if s.pos >= len(s.in) {
			return nil, false, false
		}
		switch c := s.in[s.pos]; {
		case c == '"':
			s.pos++
			return s.in[start : s.pos-1], plain, true
		case c == '\\':
			plain = false
			if !s.escape() {
				return nil, false, false
			}
		case c < ' ':
			return nil, false, false
		default: // not ASCII
			plain = false
			s.pos++
		}
	}
}

// escape checks the escape sequence at s.pos.
func (s *bodyScanner) escape() bool {
	if s.pos+1 >= len(s.in) {
		return false
	}
	switch s.in[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return true
	case 'u':
		if getu4(s.in[s.pos:]) < 0 {
			return false
		}
		s.pos += 6
		return true
	}
	return false
}

// number checks a number against the JSON grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *bodyScanner) number() bool {
	if s.in[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.in) && s.in[s.pos] == '0':
		s.pos++
	case s.digits() == 0:
		return false
	}
	if s.pos < len(s.in) && s.in[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return false
		}
	}
	if s.pos < len(s.in) && (s.in[s.pos] == 'e' || s.in[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.in) && (s.in[s.pos] == '+' || s.in[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *bodyScanner) digits() int {
	start := s.pos
	for s.pos < len(s.in) && '0' <= s.in[s.pos] && s.in[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

func (s *bodyScanner) literal(word string) *Error {
	if len(s.in)-s.pos < len(word) || string(s.in[s.pos:s.pos+len(word)]) != word {
		return errNotJSON()
	}
	s.pos += len(word)
	return nil
}

// The functions below walk JSON that scanBody has accepted, to take apart
// the values of the payload's fields (an array of names, a list of
// entries). They trust the grammar and check nothing.

// skipSpaceAt returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpaceAt(in []byte, i int) int {
	for i < len(in) && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at in[i].
func skipString(in []byte, i int) int {
	for i++; ; i++ {
		switch in[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue returns the index after the value that starts at in[i].
func skipValue(in []byte, i int) int {
	switch in[i] {
	case '"':
		return skipString(in, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch in[i] {
			case '"':
				i = skipString(in, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(in) { // a number, true, false or null
		switch in[i] {
		case ' ', '\t', '\n', '\r', ',', ']', '}':
			return i
		}
		i++
	}
	return i
}

// objectMembers appends the members of the object obj to dst.
func objectMembers(obj []byte, dst []member) []member {
	i := skipSpaceAt(obj, 1)
	for obj[i] != '}' {
		end := skipString(obj, i)
		name := unquoteJSON(obj[i+1 : end-1])
		i = skipSpaceAt(obj, skipSpaceAt(obj, end)+1) // past ':'
		end = skipValue(obj, i)
		dst = append(dst, member{name, obj[i:end]})
		if i = skipSpaceAt(obj, end); obj[i] == ',' {
			i = skipSpaceAt(obj, i+1)
		}
	}
	return dst
}

// elements walks the elements of an array.
type elements struct {
	in []byte
	i  int
}

func newElements(arr []byte) elements { return elements{arr, skipSpaceAt(arr, 1)} }

// next returns the next element, or false after the last.
func (e *elements) next() ([]byte, bool) {
	if e.in[e.i] == ']' {
		return nil, false
	}
	start := e.i
	end := skipValue(e.in, start)
	if e.i = skipSpaceAt(e.in, end); e.in[e.i] == ',' {
		e.i = skipSpaceAt(e.in, e.i+1)
	}
	return e.in[start:end], true
}

// jsonString returns the text of the string value v, quotes included.
func jsonString(v []byte) string { return string(unquoteJSON(v[1 : len(v)-1])) }

// unquoteJSON decodes the escapes of a string's content that scanBody has
// accepted, exactly as encoding/json's unquoteBytes does: a lone UTF-16
// surrogate escape and each byte that is not UTF-8 become U+FFFD. It returns
// s itself when there is nothing to decode.
func unquoteJSON(s []byte) []byte {
	r := 0
	for r < len(s) {
		c := s[r]
		if c == '\\' {
			break
		}
		if c < utf8.RuneSelf {
			r++
			continue
		}
		rr, size := utf8.DecodeRune(s[r:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		r += size
	}
	if r == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	b = append(b, s[:r]...)
	for r < len(s) {
		c := s[r]
		switch {
		case c == '\\':
			r++
			switch s[r] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r-1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						r += 6
						b = utf8.AppendRune(b, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // '"', '\\', '/'
				b = append(b, s[r])
			}
			r++
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr)
		}
	}
	return b
}

// getu4 decodes the \uXXXX escape at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// TopMember returns the raw JSON value of the top-level member called name
// (escapes in member names decoded, as everywhere here), and whether the
// body is a valid object that has it. It lets a fold read one member of a
// stored body without decoding all of it.
func TopMember(body []byte, name string) ([]byte, bool) {
	s, isObject, err := scanBody(body)
	defer s.release()
	if err != nil || !isObject {
		return nil, false
	}
	for _, m := range s.top {
		if string(m.name) == name {
			return append([]byte(nil), m.value...), true
		}
	}
	return nil, false
}
