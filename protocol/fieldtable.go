package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// This file decodes the members of a body into the payload's fields, for
// Parse, after scanBody has checked the body and found its members. Each
// payload struct is described once by a table built from its json tags, and
// each field type the payloads use is read from the member's own bytes, so
// that a frame costs neither reflection over the struct's tags nor a run of
// encoding/json per member. The results and the refusals are json.Unmarshal's
// for the same Go types (parse_oracle_test.go holds them to it).

// payloadType is what Parse needs to build the payload of one TYPE.
type payloadType struct {
	new    func() Payload
	fields *structFields
}

// payloadTypes maps each TYPE to its payload constructor and field table.
// The tables are built from the payload types' json tags once, on first
// use, rather than looked up by reflection on every frame; they are built
// lazily because newPayload is filled by an init function of another file.
var payloadTypes = sync.OnceValue(func() map[string]payloadType {
	built := make(map[reflect.Type]*structFields)
	out := make(map[string]payloadType, len(newPayload))
	for name, ctor := range newPayload {
		out[name] = payloadType{ctor, fieldsOf(reflect.TypeOf(ctor()).Elem(), built)}
	}
	return out
})

// structFields lists the fields of one struct type that are read from a
// body, in the order of the struct, which is the order they are decoded in
// and so decides which of two faulty fields is reported.
type structFields struct{ fields []fieldDecoder }

// fieldDecoder reads one member into one struct field.
type fieldDecoder struct {
	name  string // the member name: the json tag up to its first comma
	index int    // of the field in its struct
	typ   reflect.Type
	kind  fieldKind
	elem  *structFields // for kindStruct and kindStructSlice
}

// fieldKind says how a field is decoded. Each kind but kindOther reads the
// member's bytes itself, with the result and the refusal that json.Unmarshal
// gives for that exact Go type; kindOther is json.Unmarshal, so that a field
// of a type added later is still read correctly, only not as fast.
type fieldKind uint8

const (
	kindOther       fieldKind = iota
	kindString                // string
	kindBool                  // bool
	kindBoolPtr               // *bool
	kindInt64Ptr              // *int64
	kindUint64Ptr             // *uint64
	kindFloat64Ptr            // *float64
	kindAmountPtr             // *Amount
	kindTimestamp             // Timestamp
	kindURI                   // URI
	kindRawMessage            // json.RawMessage
	kindStrings               // []string
	kindStruct                // a struct without UnmarshalJSON: its members are named
	kindStructSlice           // a slice of such structs (registry entries)
)

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// fastKinds are the field types read without encoding/json.
var fastKinds = map[reflect.Type]fieldKind{
	reflect.TypeFor[string]():          kindString,
	reflect.TypeFor[bool]():            kindBool,
	reflect.TypeFor[*bool]():           kindBoolPtr,
	reflect.TypeFor[*int64]():          kindInt64Ptr,
	reflect.TypeFor[*uint64]():         kindUint64Ptr,
	reflect.TypeFor[*float64]():        kindFloat64Ptr,
	reflect.TypeFor[*Amount]():         kindAmountPtr,
	reflect.TypeFor[Timestamp]():       kindTimestamp,
	reflect.TypeFor[URI]():             kindURI,
	reflect.TypeFor[json.RawMessage](): kindRawMessage,
	reflect.TypeFor[[]string]():        kindStrings,
}

// fieldsOf builds the table of struct type t. Members match the json tags
// exactly; untagged and unexported fields are not read. built holds the
// tables made so far, so that a type is described once even if it appears
// in several payloads or contains itself.
func fieldsOf(t reflect.Type, built map[reflect.Type]*structFields) *structFields {
	if sf, ok := built[t]; ok {
		return sf
	}
	sf := &structFields{}
	built[t] = sf
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		d := fieldDecoder{name: name, index: i, typ: f.Type, kind: kindOf(f.Type)}
		switch d.kind {
		case kindStruct:
			d.elem = fieldsOf(f.Type, built)
		case kindStructSlice:
			d.elem = fieldsOf(f.Type.Elem(), built)
		}
		sf.fields = append(sf.fields, d)
	}
	return sf
}

func kindOf(t reflect.Type) fieldKind {
	if !reflect.PointerTo(t).Implements(unmarshalerType) {
		switch {
		case t.Kind() == reflect.Struct:
			return kindStruct
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
			return kindStructSlice
		}
	}
	return fastKinds[t] // kindOther if absent
}

// decodeFields fills the struct rv, described by sf, from the members of
// one object, a field at a time in the order of the struct, so that a
// refusal names the member at fault ("entries[1].agent_uri"). A member
// holding null is treated as absent, and members no field asks for are
// ignored.
func decodeFields(members []member, rv reflect.Value, sf *structFields, obj objectPath) *Error {
	if name, field, ok := sf.caseVariant(members); ok {
		return caseVariantError(fieldPath{obj, name}.String(), field)
	}
	for i := range sf.fields {
		d := &sf.fields[i]
		v := memberValue(members, d.name)
		if v == nil || string(v) == "null" {
			continue
		}
		if e := d.decode(v, rv.Field(d.index), fieldPath{obj, d.name}); e != nil {
			return e
		}
	}
	return nil
}

// caseVariant returns the first member, in document order, whose name is
// a field's in other letters, as encoding/json matches names (bytes.
// EqualFold: "AMOUNT", or "amount" with a Kelvin sign for its k if it had
// one), and that field's name. The node reads a field by its exact name
// and Go's encoding/json by the last member that folds to it, so that
// {"amount": 1, "AMOUNT": 1000} was booked as 1 and read as 1000 by an
// agent in Go, and {"task_id": "t", "STATUS": "failed"} had no status for
// the node and "failed" for that agent (helper-74). A message that means
// two things is refused, as a member named twice is.
func (sf *structFields) caseVariant(members []member) (name, field string, found bool) {
next:
	for _, m := range members {
		for i := range sf.fields {
			if string(m.name) == sf.fields[i].name {
				continue next
			}
		}
		for i := range sf.fields {
			// The field names are ASCII, so an ASCII name folds to one
			// only if it is as long; other names go through EqualFold.
			f := sf.fields[i].name
			if (len(m.name) == len(f) || !isASCII(m.name)) && bytes.EqualFold(m.name, []byte(f)) {
				return string(m.name), f, true
			}
		}
	}
	return "", "", false
}

// caseVariantError is the refusal of a member named as a field in other
// letters.
func caseVariantError(path, field string) *Error {
	return Errorf(StatusBadRequest, "member %s is the field %q in other letters; member names are case-sensitive, and a reader that matches them regardless of case would take it for %q", quoteValue(path), field, field)
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// memberValue returns the value of the member called name, or nil. The
// scan has refused any object naming a member twice, so the first is the
// only one.
func memberValue(members []member, name string) []byte {
	for _, m := range members {
		if string(m.name) == name {
			return m.value
		}
	}
	return nil
}

// decodeObject fills the struct rv from the object v, an element of a list
// of entries or a member of struct type.
func decodeObject(v []byte, rv reflect.Value, sf *structFields, obj objectPath) *Error {
	if v[0] != '{' {
		return Errorf(StatusBadRequest, "field %q must be an object", obj.String())
	}
	var buf [memberNamesScanMax]member
	return decodeFields(objectMembers(v, buf[:0]), rv, sf, obj)
}

// objectPath names an object for a refusal: a list and a position in it
// ("entries[1]"), or a path alone ("" for the body, index -1). fieldPath
// adds a member name. Both are spelled out only when a refusal is made, so
// that a body that is accepted builds no path string.
type objectPath struct {
	list  string
	index int
}

func (p objectPath) String() string {
	if p.index < 0 {
		return p.list
	}
	return p.list + "[" + strconv.Itoa(p.index) + "]"
}

type fieldPath struct {
	obj  objectPath
	name string
}

func (p fieldPath) String() string { return joinPath(p.obj.String(), p.name) }

// decode reads v, a value other than null, into the field fv.
func (d *fieldDecoder) decode(v []byte, fv reflect.Value, at fieldPath) *Error {
	switch d.kind {
	case kindString:
		if v[0] != '"' {
			return d.mustBe(at)
		}
		fv.SetString(jsonString(v))
	case kindBool, kindBoolPtr:
		var b bool
		switch string(v) {
		case "true":
			b = true
		case "false":
		default:
			return d.mustBe(at)
		}
		if d.kind == kindBool {
			fv.SetBool(b)
		} else {
			fv.Set(reflect.ValueOf(&b))
		}
	case kindInt64Ptr, kindUint64Ptr, kindFloat64Ptr:
		return d.decodeNumber(v, fv, at)
	case kindAmountPtr:
		var text string
		switch c := v[0]; {
		case c == '"':
			text = jsonString(v)
		case c == '-' || '0' <= c && c <= '9':
			text = string(v)
		default:
			return fieldRefused(at, amountNotNumber)
		}
		a, why := parseAmount(text)
		if why != "" {
			return fieldRefused(at, why)
		}
		fv.Set(reflect.ValueOf(a))
	case kindTimestamp:
		if v[0] != '"' {
			return fieldRefused(at, timestampNotString)
		}
		t, why := parseTimestamp(jsonString(v))
		if why != "" {
			return fieldRefused(at, why)
		}
		*fv.Addr().Interface().(*Timestamp) = t
	case kindURI:
		if v[0] != '"' {
			return fieldRefused(at, uriNotString)
		}
		u, why := parseURIValue(jsonString(v))
		if why != "" {
			return fieldRefused(at, why)
		}
		*fv.Addr().Interface().(*URI) = u
	case kindRawMessage:
		fv.SetBytes(bytes.Clone(v)) // a copy: the body's buffer may be reused
	case kindStrings:
		return d.decodeStrings(v, fv, at)
	case kindStruct:
		return decodeObject(v, fv, d.elem, objectPath{at.String(), -1})
	case kindStructSlice:
		return d.decodeStructs(v, fv, at)
	default:
		if err := json.Unmarshal(v, fv.Addr().Interface()); err != nil {
			var ve *valueError
			if errors.As(err, &ve) {
				return fieldRefused(at, ve.predicate)
			}
			return d.mustBe(at)
		}
	}
	return nil
}

// decodeNumber reads an integer or float field as json.Unmarshal does: with
// strconv, from the number's own text; anything but a number is refused.
func (d *fieldDecoder) decodeNumber(v []byte, fv reflect.Value, at fieldPath) *Error {
	if c := v[0]; c != '-' && (c < '0' || c > '9') {
		return d.mustBe(at)
	}
	var err error
	switch d.kind {
	case kindInt64Ptr:
		var n int64
		if n, err = strconv.ParseInt(string(v), 10, 64); err == nil {
			fv.Set(reflect.ValueOf(&n))
		}
	case kindUint64Ptr:
		var n uint64
		if n, err = strconv.ParseUint(string(v), 10, 64); err == nil {
			fv.Set(reflect.ValueOf(&n))
		}
	default:
		var n float64
		if n, err = strconv.ParseFloat(string(v), 64); err == nil {
			fv.Set(reflect.ValueOf(&n))
		}
	}
	if err != nil {
		return d.mustBe(at)
	}
	return nil
}

// decodeStrings reads a list of names. As with json.Unmarshal, an empty
// array gives an empty list, not nil, and a null element an empty string.
func (d *fieldDecoder) decodeStrings(v []byte, fv reflect.Value, at fieldPath) *Error {
	if v[0] != '[' {
		return d.mustBe(at)
	}
	list := make([]string, 0, countElements(v))
	for it := newElements(v); ; {
		elem, ok := it.next()
		if !ok {
			break
		}
		switch elem[0] {
		case '"':
			list = append(list, jsonString(elem))
		case 'n':
			list = append(list, "")
		default:
			return d.mustBe(at)
		}
	}
	*fv.Addr().Interface().(*[]string) = list
	return nil
}

// decodeStructs reads a list of entries, each an object whose members are
// named in a refusal by their position: "entries[1].agent_uri".
func (d *fieldDecoder) decodeStructs(v []byte, fv reflect.Value, at fieldPath) *Error {
	if v[0] != '[' {
		return Errorf(StatusBadRequest, "field %q must be an array", at.String())
	}
	n := countElements(v)
	list := reflect.MakeSlice(d.typ, n, n)
	listPath := at.String() // allocates nothing for a member of the body
	it := newElements(v)
	for i := range n {
		elem, _ := it.next()
		if e := decodeObject(elem, list.Index(i), d.elem, objectPath{listPath, i}); e != nil {
			return e
		}
	}
	fv.Set(list)
	return nil
}

func countElements(arr []byte) int {
	n := 0
	for it := newElements(arr); ; n++ {
		if _, ok := it.next(); !ok {
			return n
		}
	}
}

// mustBe refuses a member of the wrong JSON type for the field.
func (d *fieldDecoder) mustBe(at fieldPath) *Error {
	return Errorf(StatusBadRequest, "field %q must be %s", at.String(), jsonKind(d.typ))
}

// fieldRefused puts the field's name in front of a value's own reason:
// `field "amount" ` + `is not a finite number`.
func fieldRefused(at fieldPath, predicate string) *Error {
	return Errorf(StatusBadRequest, "field %q %s", at.String(), predicate)
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
