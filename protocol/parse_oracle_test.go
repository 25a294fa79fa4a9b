package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This file keeps the body reader Parse had before jsonscan.go (a walk with
// encoding/json's Token API, then json.Unmarshal member by member) as an
// oracle: FuzzParseMatchesOracle holds the one-pass reader to its refusals,
// word for word, and to its payloads, value for value. The oracle is slow
// and simple on purpose; it is not compiled into the package.

func oracleParse(f *Frame) (*Message, error) {
	m := &Message{Frame: f}
	var e *Error
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
	m.Info = info
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
	if e := oracleCheckDuplicates(body); e != nil {
		return nil, e
	}
	m.Payload = newPayload[info.Name]()
	if e := oracleDecodeObject(body, reflect.ValueOf(m.Payload).Elem(), ""); e != nil {
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

func oracleCheckDuplicates(body []byte) *Error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if e := oracleWalkValue(dec, "", 0); e != nil {
		return e
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(StatusBadRequest, "the body holds more than one JSON value")
	}
	return nil
}

func oracleWalkValue(dec *json.Decoder, path string, depth int) *Error {
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
			if e := oracleWalkValue(dec, path+"["+strconv.Itoa(i)+"]", depth+1); e != nil {
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
			if e := oracleWalkValue(dec, joinPath(path, key), depth+1); e != nil {
				return e
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return Errorf(StatusBadRequest, "the body is not valid JSON")
	}
	return nil
}

func oracleDecodeObject(raw []byte, rv reflect.Value, path string) *Error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		if path == "" {
			return Errorf(StatusBadRequest, "the body must be a JSON object")
		}
		return Errorf(StatusBadRequest, "field %q must be an object", path)
	}
	t := rv.Type()
	var fields []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" && t.Field(i).IsExported() {
			fields = append(fields, name)
		}
	}
	// A member named as a field in other letters, the first in document
	// order, is refused before anything is read.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.Token() // {
	for dec.More() {
		tok, _ := dec.Token()
		key, _ := tok.(string)
		var skip json.RawMessage
		dec.Decode(&skip)
		if slices.Contains(fields, key) {
			continue
		}
		for _, f := range fields {
			if strings.EqualFold(key, f) {
				return caseVariantError(joinPath(path, key), f)
			}
		}
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || !t.Field(i).IsExported() {
			continue
		}
		member, ok := members[name]
		if !ok || string(member) == "null" {
			continue
		}
		if e := oracleDecodeMember(member, rv.Field(i), joinPath(path, name)); e != nil {
			return e
		}
	}
	return nil
}

func oracleDecodeMember(raw []byte, fv reflect.Value, path string) *Error {
	ptr := fv.Addr().Interface()
	if _, custom := ptr.(json.Unmarshaler); !custom {
		switch {
		case fv.Kind() == reflect.Struct:
			return oracleDecodeObject(raw, fv, path)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			var elems []json.RawMessage
			if err := json.Unmarshal(raw, &elems); err != nil {
				return Errorf(StatusBadRequest, "field %q must be an array", path)
			}
			s := reflect.MakeSlice(fv.Type(), len(elems), len(elems))
			for i, elem := range elems {
				if e := oracleDecodeObject(elem, s.Index(i), path+"["+strconv.Itoa(i)+"]"); e != nil {
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

// oracleSeeds are bodies that probe the corners where a hand-written reader
// could part from encoding/json: escapes, bytes that are not UTF-8, lone
// surrogates, nulls, odd numbers, nesting and garbage after the object.
var oracleSeeds = []string{
	``, `{}`, ` {} `, `{} {}`, `{}x`, `[]`, `null`, `"s"`, `1`, `1x`, `01`, `-`, `{"a":01}`, `{"a":1.}`,
	`{"a":1,}`, `{"a" 1}`, `{"a":1 "b":2}`, `{,}`, `[1,]`, `[1 2]`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`,
	`{"amount": 1, "\u0061mount": 2}`, `{"AMOUNT": 1}`, `{"amount": 1, "Amount": 2}`, `{"tas\u212a_id": "t"}`, `{"entries": [{"AGENT_ID": "a"}]}`, `{"a\ud800": 1, "a\udc00": 2}`, "{\"\xff\": 1, \"\xfe\": 2}",
	`{"x": {"k": 1, "k": 2}}`, `[{"a": 1}, {"b": 1, "b": 2}]`, `{"a": "\x"}`, `{"a": "\u12"}`, "{\"a\": \"\x01\"}",
	`{"task_id": "t\u00e9\ud83d\ude00\ud800x", "reason": "\"\\\/\b\f\n\r\t"}`, "{\"task_id\": \"t\xff\xfe\"}",
	`{"entries": [{"agent_id": "a", "agent_uri": "agent://A.local", "ttl": 5}, {"agent_id": "b", "agent_uri": "registry://b"}]}`,
	`{"entries": [null]}`, `{"entries": [1]}`, `{"entries": {}}`, `{"entries": []}`, `{"entries": "x"}`,
	`{"known_agents": [{"agent_uri": null}]}`, `{"known_agents": [{"agent_uri": 7}]}`,
	`{"agent_name": "n", "capabilities": ["a", null, "b"]}`, `{"agent_name": "n", "capabilities": ["a", 1]}`,
	`{"agent_name": "n", "capabilities": []}`, `{"agent_name": "n", "port": -0, "ttl": 1e3}`,
	`{"agent_name": "n", "port": 99999999999999999999}`, `{"seq": -0}`, `{"seq": 18446744073709551615}`,
	`{"score": 1e400}`, `{"score": 1e-400}`, `{"score": -0}`, `{"approve": true, "request_id": "r"}`,
	`{"amount": "\u0033", "currency": "AGLX", "timestamp": "2025-10-29T19:02:40\u005a", "transaction_id": "tx"}`,
	`{"amount": [1], "currency": "AGLX"}`, `{"amount": {}, "currency": 1}`, `{"amount": "1e3"}`,
	`{"task": "x", "payload": {"a": [1, {"b": null}]}, "priority": 2}`, `{"task": "x", "payload": "s"}`,
	`{"task_id": "t", "status": "OK", "result": [1, 2], "duration": 1.5}`,
	`{"duplicate": "yes"}`, `{"duplicate": false, "event_id": "e"}`,
	strings.Repeat(`[`, JSONDepthMax) + `1` + strings.Repeat(`]`, JSONDepthMax),
	strings.Repeat(`[`, JSONDepthMax+1) + `1` + strings.Repeat(`]`, JSONDepthMax+1),
	`{` + strings.Repeat(`"k": 1, `, 2) + `"z": 0}`,
	oracleManyMembers(40, false), oracleManyMembers(40, true),
}

func oracleManyMembers(n int, dup bool) string {
	var b strings.Builder
	b.WriteString(`{`)
	for i := range n {
		b.WriteString(`"m` + strconv.Itoa(i) + `": ` + strconv.Itoa(i) + `, `)
	}
	if dup {
		b.WriteString(`"m31": 0, `)
	}
	b.WriteString(`"task_id": "t"}`)
	return b.String()
}

// checkOracle fails t unless Parse and the oracle agree on f.
func checkOracle(t *testing.T, f *Frame) {
	t.Helper()
	got, gotErr := Parse(f)
	want, wantErr := oracleParse(f)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("Parse(%s, %q) = %v, want %v", f.Type(), f.Body, gotErr, wantErr)
	case gotErr != nil:
		if gotErr.Error() != wantErr.Error() {
			t.Fatalf("Parse(%s, %q) = %v, want %v", f.Type(), f.Body, gotErr, wantErr)
		}
	}
	if gotErr != nil {
		return
	}
	// The member Parse keeps for the registry is the one a second pass over
	// the body finds.
	want.timestampRaw, _ = TopMember(f.Body, "timestamp")
	_, want.signed = TopMember(f.Body, "signature")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse(%s, %q) = %#v, want %#v", f.Type(), f.Body, got, want)
	}
}

func TestParseMatchesOracle(t *testing.T) {
	for name, f := range validExamples(t) {
		t.Run(name, func(t *testing.T) { checkOracle(t, f) })
	}
	for _, info := range Types() {
		for i, body := range oracleSeeds {
			t.Run(info.Name+"/"+strconv.Itoa(i), func(t *testing.T) {
				f := testFrame(info.Name, "")
				f.Body = []byte(body)
				checkOracle(t, f)
			})
		}
	}
}

// FuzzParseMatchesOracle feeds the same bodies to Parse and to the oracle
// under every TYPE.
func FuzzParseMatchesOracle(f *testing.F) {
	types := Types()
	for _, ex := range validExamples(f) {
		for i, info := range types {
			if info.Name == ex.Type() {
				f.Add(uint8(i), ex.Body)
			}
		}
	}
	for i, body := range oracleSeeds {
		f.Add(uint8(i%len(types)), []byte(body))
	}
	f.Fuzz(func(t *testing.T, i uint8, body []byte) {
		fr := testFrame(types[int(i)%len(types)].Name, "")
		fr.Body = body
		checkOracle(t, fr)
	})
}

// oddPayload has fields of the kinds no payload of the package uses today,
// so that the generic paths of fieldtable.go (kindOther through
// json.Unmarshal, nested structs, untagged fields) are held to the oracle
// too.
type oddPayload struct {
	Count    int               `json:"count"`
	Ratio    float32           `json:"ratio,omitempty"`
	Labels   map[string]string `json:"labels"`
	Note     *string           `json:"note"`
	When     *Timestamp        `json:"when"`
	Where    []URI             `json:"where"`
	Inner    oddInner          `json:"inner"`
	Ptrs     []*oddInner       `json:"ptrs"`
	Times    []Timestamp       `json:"times"`
	Skipped  string            `json:"-"`
	Untagged string
}

type oddInner struct {
	Name  string     `json:"name"`
	Deep  *Amount    `json:"deep"`
	Again []oddInner `json:"again"`
}

func TestDecodeFieldsMatchesOracle(t *testing.T) {
	fields := fieldsOf(reflect.TypeFor[oddPayload](), map[reflect.Type]*structFields{})
	bodies := append([]string{
		`{"count": 3, "ratio": 0.5, "labels": {"a": "b"}, "note": "n", "when": "2025-10-29T19:02:40Z", "where": ["agent://a"]}`,
		`{"count": 2.5}`, `{"count": "3"}`, `{"ratio": 1e300}`, `{"labels": []}`, `{"note": 5}`, `{"when": 5}`,
		`{"when": "yesterday"}`, `{"where": ["agent:/x"]}`, `{"where": [7]}`, `{"where": "agent://a"}`,
		`{"inner": {"name": "i", "deep": "1.5", "again": [{"name": "j", "again": [{"deep": true}]}]}}`,
		`{"inner": {"again": [{"name": 1}]}}`, `{"inner": 5}`, `{"inner": {"again": {}}}`,
		`{"ptrs": [{"name": "p"}, null]}`, `{"ptrs": [{"name": 1}]}`, `{"times": [{}]}`, `{"times": ["2025-10-29T19:02:40Z"]}`,
		`{"count": 1, "-": "y", "Untagged": "z"}`, `{"Untagged": 5, "-": 5}`,
	}, oracleSeeds...)
	for i, body := range bodies {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			var got, want oddPayload
			wantErr := oracleCheckDuplicates([]byte(body))
			if wantErr == nil {
				wantErr = oracleDecodeObject([]byte(body), reflect.ValueOf(&want).Elem(), "")
			}
			s, isObject, gotErr := scanBody([]byte(body))
			defer s.release()
			if gotErr == nil && !isObject {
				gotErr = Errorf(StatusBadRequest, "the body must be a JSON object")
			}
			if gotErr == nil {
				gotErr = decodeFields(s.top, reflect.ValueOf(&got).Elem(), fields, objectPath{index: -1})
			}
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Fatalf("decoding %q: %v, want %v", body, gotErr, wantErr)
			}
			if gotErr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("decoding %q: %+v, want %+v", body, got, want)
			}
		})
	}
}
