package protocol

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Payload is the typed body of one TYPE (*CreditTransfer for
// credit.transfer, and so on).
type Payload interface {
	// Validate checks the rules of the TYPE that a JSON decoder cannot:
	// required fields, ranges, known values. It returns a *Error with
	// StatusBadRequest whose reason names the field. Validate reads only the
	// payload, so it checks a payload the node builds as well as one it
	// receives.
	Validate() error
}

// Message is a frame whose headers and body have been checked: what a
// handler gets, so that no handler parses or validates anything itself.
type Message struct {
	// Frame is the frame as received; its Body is nil if there was none.
	Frame *Frame
	Info  TypeInfo
	From  URI
	// To is the zero URI on an agent.announce without TO.
	To URI
	// Credits is the CREDITS header (credits offered for a task.assign), or
	// nil if there was none.
	Credits *Amount
	// Payload is a pointer to the payload type of Info, e.g. *CreditTransfer.
	Payload Payload

	// timestampRaw is the raw JSON value of the body's top-level
	// "timestamp" member, nil when absent. The registry's fold reads it for
	// every signed message, and Parse's one pass over the body has found
	// it already.
	timestampRaw []byte
	// signed says whether the body has a top-level "signature" member
	// (its name's escapes decoded), whatever its value.
	signed bool
}

// HasSignatureMember reports whether the body has a top-level "signature"
// member, its name written with or without escapes, whatever its value:
// then its signature is judged. One pass of Parse found it; a byte search
// for "signature" missed an escaped name, and a body that merely mentions
// the word (in a string) was taken for a signed one.
func (m *Message) HasSignatureMember() bool { return m.signed }

// TimestampRaw is the raw JSON value of the body's top-level "timestamp"
// member, whatever the TYPE's payload makes of it, or nil: signed messages
// of every TYPE must carry one.
func (m *Message) TimestampRaw() []byte { return m.timestampRaw }

// Parse checks a decoded frame's headers and body and returns its typed
// message. A refusal is a *Error with StatusBadRequest, never Fatal: the
// frame was whole, so the connection can go on.
//
// The rules: TYPE is required and must be known (exact, case-sensitive
// match); FROM is required and an AGLX address; TO is required and an AGLX
// address, except on agent.announce, a broadcast, where it may be absent; a
// CREDITS header must hold a positive Amount. The transport is not checked
// here: the start line only says what the sender claims, and the bridge,
// which knows what carried the frame, refuses datagrams of TYPEs that are not
// TypeInfo.UDP (docs/PROTOCOL.md, "UDP"). The body must be one JSON object
// that names no member twice; its members are matched to the payload's json
// tags exactly (not case-insensitively as encoding/json would), unknown ones
// are ignored, and the payload's Validate has the last word. A frame without a
// body is read as {}, which passes only for TYPEs without required fields
// (ack, credit.balance, registry.ack); for the others it is refused as "the
// body is missing".
func Parse(f *Frame) (*Message, error) {
	m, err := parse(f)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func parse(f *Frame) (*Message, *Error) {
	typ, ok := f.Get(HeaderType)
	if !ok || typ == "" {
		return nil, Errorf(StatusBadRequest, "the frame has no TYPE header")
	}
	info, ok := Lookup(typ)
	if !ok {
		if known, ok := Lookup(strings.ToLower(typ)); ok {
			return nil, Errorf(StatusBadRequest, "unknown TYPE %s; TYPEs are case-sensitive: did you mean %q?", quoteValue(typ), known.Name)
		}
		if near, ok := NearestType(typ); ok {
			return nil, Errorf(StatusBadRequest, "unknown TYPE %s; did you mean %q?", quoteValue(typ), near)
		}
		return nil, Errorf(StatusBadRequest, "unknown TYPE %s", quoteValue(typ))
	}
	m := &Message{Frame: f, Info: info}
	var e *Error
	if m.From, e = addressHeader(f, HeaderFrom, true); e != nil {
		return nil, e
	}
	// TO may be missing on an ack or error, which answer a frame: the
	// node's own error to a frame without a FROM has none.
	if m.To, e = addressHeader(f, HeaderTo, !info.UDP && !info.NoReply); e != nil {
		return nil, e
	}
	if id, ok := f.Get(HeaderID); ok && (len(id) > IDSizeMax || !visibleASCII(id)) {
		// The ID comes back as IN-REPLY-TO, nine bytes longer: a long one
		// made the reply a line no decoder takes. It is a dedup key too.
		return nil, Errorf(StatusBadRequest, "the ID header must be 1 to %d bytes of visible ASCII", IDSizeMax)
	}
	if credits, ok := f.Get(HeaderCredits); ok {
		a, why := parseAmount(credits)
		if why != "" {
			return nil, Errorf(StatusBadRequest, "CREDITS header %s", why)
		}
		if a.Decimal().Sign() <= 0 {
			return nil, Errorf(StatusBadRequest, "CREDITS header must be positive, got %s", quoteValue(credits))
		}
		m.Credits = a
	}
	body := f.Body
	if len(body) == 0 {
		body = emptyBody
	}
	s, isObject, e := scanBody(body)
	defer s.release()
	if e != nil {
		return nil, e
	}
	if !isObject {
		return nil, Errorf(StatusBadRequest, "the body must be a JSON object")
	}
	m.timestampRaw = memberValue(s.top, "timestamp")
	m.signed = memberValue(s.top, "signature") != nil
	pt := payloadTypes()[info.Name]
	m.Payload = pt.new()
	if e := decodeFields(s.top, reflect.ValueOf(m.Payload).Elem(), pt.fields, objectPath{index: -1}); e != nil {
		return nil, e
	}
	if err := m.Payload.Validate(); err != nil {
		if len(f.Body) == 0 {
			return nil, Errorf(StatusBadRequest, "the body is missing")
		}
		return nil, asBadRequest(err)
	}
	return m, nil
}

// emptyBody is what a frame without a body is read as. Nothing writes to it.
var emptyBody = []byte("{}")

// addressHeader reads the FROM or TO header. An empty value counts as absent.
func addressHeader(f *Frame, name string, required bool) (URI, *Error) {
	v := f.Value(name)
	if v == "" {
		if required {
			return URI{}, Errorf(StatusBadRequest, "the frame has no %s header", name)
		}
		return URI{}, nil
	}
	u, why := parseURI(v)
	if why != "" {
		return URI{}, Errorf(StatusBadRequest, "%s %s %s", name, quoteValue(v), why)
	}
	return u, nil
}

// asBadRequest keeps a Validate error's *Error, and turns anything else
// (which no payload of this package returns) into a 400 all the same, since
// it is about the frame.
func asBadRequest(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Errorf(StatusBadRequest, "%s", err.Error())
}

// valueError is the refusal of one JSON value by its own UnmarshalJSON
// (Amount, Timestamp, URI), which does not know the member it was found in.
// Its predicate reads after the member's name; fieldRefused puts the name in
// front: `field "amount" ` + `is not a finite number`.
type valueError struct{ predicate string }

func (e *valueError) Error() string { return "the value " + e.predicate }

// Unwrap lets StatusOf find a 400 in a valueError met outside Parse.
func (e *valueError) Unwrap() error { return Errorf(StatusBadRequest, "the value %s", e.predicate) }

// quoteValueSizeMax bounds what a reason echoes of a value, so that a reply
// never carries much of what the sender sent.
const quoteValueSizeMax = 40 // bytes

// quoteValue quotes s for a reason, cut at a character boundary.
func quoteValue(s string) string {
	if len(s) <= quoteValueSizeMax {
		return strconv.Quote(s)
	}
	cut := quoteValueSizeMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
