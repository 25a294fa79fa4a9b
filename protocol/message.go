package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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
}

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
		return nil, Errorf(StatusBadRequest, "unknown TYPE %s", quoteValue(typ))
	}
	m := &Message{Frame: f, Info: info}
	var e *Error
	if m.From, e = addressHeader(f, HeaderFrom, true); e != nil {
		return nil, e
	}
	if m.To, e = addressHeader(f, HeaderTo, !info.UDP); e != nil {
		return nil, e
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
		body = []byte("{}")
	}
	if e := checkDuplicates(body); e != nil {
		return nil, e
	}
	m.Payload = newPayload[info.Name]()
	if e := decodeObject(body, reflect.ValueOf(m.Payload).Elem(), ""); e != nil {
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

// checkDuplicates walks the whole body once, before anything reads it, and
// refuses an object that names one member twice. encoding/json would keep the
// last of two "amount" members where another reader, or the person checking
// a signature, may take the first; a message that means two things is
// refused. The walk also bounds the nesting, for a frame that did not come
// through the Decoder.
func checkDuplicates(body []byte) *Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers are not converted, so none can overflow here
	if e := walkValue(dec, "", 0); e != nil {
		return e
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(StatusBadRequest, "the body holds more than one JSON value")
	}
	return nil
}

func walkValue(dec *json.Decoder, path string, depth int) *Error {
	tok, err := dec.Token()
	if err != nil {
		return Errorf(StatusBadRequest, "the body is not valid JSON")
	}
	delim, ok := tok.(json.Delim)
	if !ok || delim == '}' || delim == ']' {
		return nil
	}
	if depth == JSONDepthMax {
		return Errorf(StatusBadRequest, "the body is nested deeper than %d levels", JSONDepthMax)
	}
	if delim == '[' {
		for i := 0; dec.More(); i++ {
			if e := walkValue(dec, path+"["+strconv.Itoa(i)+"]", depth+1); e != nil {
				return e
			}
		}
	} else {
		seen := make(map[string]bool)
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return Errorf(StatusBadRequest, "the body is not valid JSON")
			}
			key, _ := tok.(string)
			if seen[key] {
				return Errorf(StatusBadRequest, "member %s appears twice; a member may appear only once", quoteValue(joinPath(path, key)))
			}
			seen[key] = true
			if e := walkValue(dec, joinPath(path, key), depth+1); e != nil {
				return e
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ']' or '}'
		return Errorf(StatusBadRequest, "the body is not valid JSON")
	}
	return nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// decodeObject fills the struct rv from the JSON object raw, one member at a
// time, so that a refusal names the member at fault ("entries[1].agent_uri"),
// which json.Unmarshal cannot do for errors of custom types. Members match the
// json tags exactly; untagged fields and unknown members are skipped; a
// member holding null is treated as absent.
func decodeObject(raw []byte, rv reflect.Value, path string) *Error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		if path == "" {
			return Errorf(StatusBadRequest, "the body must be a JSON object")
		}
		return Errorf(StatusBadRequest, "field %q must be an object", path)
	}
	t := rv.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || !t.Field(i).IsExported() {
			continue
		}
		member, ok := members[name]
		if !ok || string(member) == "null" {
			continue
		}
		if e := decodeMember(member, rv.Field(i), joinPath(path, name)); e != nil {
			return e
		}
	}
	return nil
}

// decodeMember decodes one member into the field fv. Nested structs and
// slices of structs (registry entries) go through decodeObject so that their
// members are named too; everything else is json.Unmarshal's.
func decodeMember(raw []byte, fv reflect.Value, path string) *Error {
	ptr := fv.Addr().Interface()
	if _, custom := ptr.(json.Unmarshaler); !custom {
		switch {
		case fv.Kind() == reflect.Struct:
			return decodeObject(raw, fv, path)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			var elems []json.RawMessage
			if err := json.Unmarshal(raw, &elems); err != nil {
				return Errorf(StatusBadRequest, "field %q must be an array", path)
			}
			s := reflect.MakeSlice(fv.Type(), len(elems), len(elems))
			for i, elem := range elems {
				if e := decodeObject(elem, s.Index(i), path+"["+strconv.Itoa(i)+"]"); e != nil {
					return e
				}
			}
			fv.Set(s)
			return nil
		}
	}
	if err := json.Unmarshal(raw, ptr); err != nil {
		var ve *valueError
		if errors.As(err, &ve) {
			return Errorf(StatusBadRequest, "field %q %s", path, ve.predicate)
		}
		return Errorf(StatusBadRequest, "field %q must be %s", path, jsonKind(fv.Type()))
	}
	return nil
}

// jsonKind names the JSON value a Go type is read from, for a reason such as
// `field "priority" must be an integer`.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	default:
		return "an object"
	}
}

// valueError is the refusal of one JSON value by its own UnmarshalJSON
// (Amount, Timestamp, URI), which does not know the member it was found in.
// Its predicate reads after the member's name; decodeMember puts the name in
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
