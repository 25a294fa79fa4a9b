package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// update rewrites golden files instead of comparing with them:
// go test ./protocol/ -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestCanonical(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty object", `{}`, `{}`},
		{"white space around", " \r\n\t{ }\n ", `{}`},
		{"members sorted", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"sorted by code unit not length", `{"aa":1,"b":2,"a":3,"A":4}`, `{"A":4,"a":3,"aa":1,"b":2}`},
		// RFC 8785 section 3.2.3: U+1F600 is the surrogate pair D83D DE00 in
		// UTF-16, so it sorts before U+FB33 although its code point is larger.
		{"utf-16 order", `{"\ufb33":3,"\ud83d\ude00":2,"\u20ac":1}`, "{\"\u20ac\":1,\"\U0001F600\":2,\"\ufb33\":3}"},
		{"rfc 8785 sorting example",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One",` +
				`"\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
				"\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"nested objects sorted", `{"z":{"y":1,"x":[{"b":0,"a":0}]},"a":null}`, `{"a":null,"z":{"x":[{"a":0,"b":0}],"y":1}}`},
		{"literals and arrays", `{ "x" : [ 1 , true , false , null , [ ] , { } ] }`, `{"x":[1,true,false,null,[],{}]}`},
		{"escapes kept short", `{"s":"\"\\\b\f\n\r\t"}`, `{"s":"\"\\\b\f\n\r\t"}`},
		{"escapes undone", `{"s":"\u0041\/\u00e9\u20AC\ud83d\ude00"}`, "{\"s\":\"A/\u00e9\u20ac\U0001F600\"}"},
		{"control characters in lower-case hex", `{"s":"\u001F\u0000\u000b"}`, `{"s":"\u001f\u0000\u000b"}`},
		{"short escapes for short controls", `{"s":"\u0008\u0009\u000A\u000c\u000D"}`, `{"s":"\b\t\n\f\r"}`},
		{"DEL and line separators raw", `{"s":"\u007f\u2028\u2029"}`, "{\"s\":\"\x7f\u2028\u2029\"}"},
		{"raw UTF-8 kept", "{\"s\":\"gr\u00fc\u00df \U0001F600\"}", "{\"s\":\"gr\u00fc\u00df \U0001F600\"}"},
		{"escaped keys", `{"\u0062":1,"\u0061":2}`, `{"a":2,"b":1}`},
		{"number 1.50 kept", `{"a":1.50}`, `{"a":1.50}`},
		{"number -0 kept", `{"a":-0}`, `{"a":-0}`},
		{"number 1E+2 kept", `{"a":1E+2}`, `{"a":1E+2}`},
		{"number 3.0 kept", `{"a":3.0}`, `{"a":3.0}`},
		{"number 1e-7 kept", `{"a":1e-7}`, `{"a":1e-7}`},
		{"number beyond float64 kept", `{"a":123456789012345678901234567890.000000000000000000001}`, `{"a":123456789012345678901234567890.000000000000000000001}`},
		{"top-level signature removed", `{"signature":"rsa-sha256:00","a":1}`, `{"a":1}`},
		{"top-level signature of any type removed", `{"a":1,"signature":{"x":[1]}}`, `{"a":1}`},
		{"only a signature", `{ "signature" : "x" }`, `{}`},
		{"escaped signature name removed", `{"sig\u006eature":"x","a":1}`, `{"a":1}`},
		{"nested signature kept", `{"a":{"signature":"x"}}`, `{"a":{"signature":"x"}}`},
		{"signature in array kept", `{"l":[{"signature":1}]}`, `{"l":[{"signature":1}]}`},
		{"other case kept", `{"Signature":1}`, `{"Signature":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonical(%q) error: %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestCanonicalNumbersKeepTheirText(t *testing.T) {
	pairs := [][2]string{
		{"1.50", "1.5"}, {"3", "3.0"}, {"1e2", "100"}, {"-0", "0"}, {"1E+2", "1e+2"}, {"1e2", "1e+2"},
		{"9007199254740993", "9007199254740992"}, // equal as float64
	}
	for _, p := range pairs {
		t.Run(p[0]+" vs "+p[1], func(t *testing.T) {
			a, errA := Canonical([]byte(`{"amount":` + p[0] + `}`))
			b, errB := Canonical([]byte(`{"amount":` + p[1] + `}`))
			if errA != nil || errB != nil {
				t.Fatalf("Canonical errors: %v, %v", errA, errB)
			}
			if bytes.Equal(a, b) {
				t.Errorf("Canonical gives %q for both %s and %s, want different bytes", a, p[0], p[1])
			}
		})
	}
}

func TestCanonicalWhiteSpace(t *testing.T) {
	variants := []string{
		`{"amount":3,"tags":["a","b"],"meta":{"k":"v","n":null}}`,
		"{\n  \"amount\": 3,\n  \"tags\": [\"a\", \"b\"],\n  \"meta\": {\"k\": \"v\", \"n\": null}\n}\n",
		"{\r\n\t\"meta\" :\t{ \"n\" : null , \"k\" : \"v\" } ,\r\n\t\"tags\" : [ \"a\" ,\"b\" ] ,\"amount\":3\r\n}",
		`  {"tags":["a","b"],"meta":{"n":null,"k":"v"},"amount":3}  `,
		`{"tags":["\u0061","b"],"meta":{"n":null,"\u006b":"\u0076"},"amount":3,"signature":"ed25519:00"}`,
	}
	want, err := Canonical([]byte(variants[0]))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range variants {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			got, err := Canonical([]byte(v))
			if err != nil {
				t.Fatalf("Canonical(%q) error: %v", v, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Canonical(%q) = %q, want %q", v, got, want)
			}
		})
	}
}

func TestCanonicalRejects(t *testing.T) {
	deep := func(n int) string { return `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}` }
	tests := []struct {
		name, in string
		want     Status
	}{
		{"empty", ``, StatusBadRequest},
		{"white space only", " \n", StatusBadRequest},
		{"array", `[]`, StatusBadRequest},
		{"string", `"x"`, StatusBadRequest},
		{"number", `1`, StatusBadRequest},
		{"two objects", `{}{}`, StatusBadRequest},
		{"data after", `{} x`, StatusBadRequest},
		{"byte order mark", "\ufeff{}", StatusBadRequest},
		{"non-breaking space", "{\u00a0}", StatusBadRequest},
		{"unterminated object", `{"a":1`, StatusBadRequest},
		{"unterminated string", `{"a":"x}`, StatusBadRequest},
		{"trailing comma in object", `{"a":1,}`, StatusBadRequest},
		{"trailing comma in array", `{"a":[1,]}`, StatusBadRequest},
		{"missing colon", `{"a" 1}`, StatusBadRequest},
		{"missing comma", `{"a":1 "b":2}`, StatusBadRequest},
		{"unquoted key", `{a:1}`, StatusBadRequest},
		{"single quotes", `{'a':1}`, StatusBadRequest},
		{"comment", `{"a":1 /* c */}`, StatusBadRequest},
		{"duplicate member", `{"a":1,"a":2}`, StatusBadRequest},
		{"duplicate same value", `{"a":1,"b":0,"a":1}`, StatusBadRequest},
		{"duplicate nested", `{"x":{"a":1,"a":2}}`, StatusBadRequest},
		{"duplicate in array", `{"x":[{"a":1,"a":2}]}`, StatusBadRequest},
		{"duplicate through escape", `{"a":1,"\u0061":2}`, StatusBadRequest},
		{"duplicate signature", `{"signature":"ed25519:00","signature":"ed25519:01"}`, StatusBadRequest},
		{"leading zero", `{"a":01}`, StatusBadRequest},
		{"leading plus", `{"a":+1}`, StatusBadRequest},
		{"bare point", `{"a":.5}`, StatusBadRequest},
		{"point without digits", `{"a":1.}`, StatusBadRequest},
		{"empty exponent", `{"a":1e}`, StatusBadRequest},
		{"lone minus", `{"a":-}`, StatusBadRequest},
		{"NaN", `{"a":NaN}`, StatusBadRequest},
		{"Infinity", `{"a":-Infinity}`, StatusBadRequest},
		{"hex number", `{"a":0x10}`, StatusBadRequest},
		{"truncated literal", `{"a":tru}`, StatusBadRequest},
		{"capital literal", `{"a":True}`, StatusBadRequest},
		{"raw tab in string", "{\"a\":\"\t\"}", StatusBadRequest},
		{"raw line feed in string", "{\"a\":\"\n\"}", StatusBadRequest},
		{"unknown escape", `{"a":"\x41"}`, StatusBadRequest},
		{"short unicode escape", `{"a":"\u12"}`, StatusBadRequest},
		{"bad hex in escape", `{"a":"\u12G4"}`, StatusBadRequest},
		{"lone high surrogate", `{"a":"\ud83d"}`, StatusBadRequest},
		{"lone high surrogate then text", `{"a":"\ud83dx"}`, StatusBadRequest},
		{"high surrogate then non-surrogate", `{"a":"\ud83d\u0041"}`, StatusBadRequest},
		{"two high surrogates", `{"a":"\ud83d\ud83d"}`, StatusBadRequest},
		{"lone low surrogate", `{"a":"\ude00"}`, StatusBadRequest},
		{"lone surrogate in key", `{"\udfff":1}`, StatusBadRequest},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", StatusBadRequest},
		{"invalid UTF-8 in key", "{\"\xc3\":1}", StatusBadRequest},
		{"overlong UTF-8", "{\"a\":\"\xc0\xaf\"}", StatusBadRequest},
		{"UTF-8 surrogate", "{\"a\":\"\xed\xa0\x80\"}", StatusBadRequest},
		{"truncated UTF-8", "{\"a\":\"\xe2\x82\"}", StatusBadRequest},
		{"too deep", deep(JSONDepthMax), StatusBadRequest},
		{"too large", `{"a":"` + strings.Repeat("x", BodySizeMaxLimit) + `"}`, StatusTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			var pe *Error
			if !errors.As(err, &pe) || pe.Status != tt.want {
				t.Fatalf("Canonical(%q) = %q, %v; want a %d refusal", shorten(tt.in), got, err, tt.want)
			}
			if pe.Reason == "" || pe.Fatal {
				t.Errorf("Canonical(%q) refusal %+v, want a reason and not fatal", shorten(tt.in), pe)
			}
		})
	}
	t.Run("deepest accepted", func(t *testing.T) {
		in := deep(JSONDepthMax - 1) // the object plus 63 arrays: 64 levels
		if _, err := Canonical([]byte(in)); err != nil {
			t.Errorf("Canonical(64 levels) error: %v, want the depth limit to allow it", err)
		}
	})
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// goldenCases lists the fixture folders under testdata/signatures, each with
// an input.json.
func goldenCases(tb testing.TB) []string {
	tb.Helper()
	dirs, err := filepath.Glob("../testdata/signatures/*/input.json")
	if err != nil || len(dirs) == 0 {
		tb.Fatalf("no golden cases under testdata/signatures: %v", err)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Dir(d)
	}
	return dirs
}

// checkGolden compares got with the golden file path, or rewrites it under
// -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", path, got, want)
	}
}

func TestCanonicalGolden(t *testing.T) {
	for _, dir := range goldenCases(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(dir, "input.json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonical(in)
			if err != nil {
				t.Fatalf("Canonical(%s) error: %v", dir, err)
			}
			checkGolden(t, filepath.Join(dir, "canonical.json"), got)
		})
	}
}

// TestCanonicalProperties renders random objects with random member order,
// white space and string escapes, and checks that every rendering of one
// object has one canonical form, and that the canonical form is a fixed
// point.
func TestCanonicalProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(8785, 1))
	const objects, renderings = 500, 4
	for i := range objects {
		obj := randomObject(r, 0)
		first := renderJSON(r, obj)
		want, err := Canonical(first)
		if err != nil {
			t.Fatalf("Canonical(%q) error: %v", first, err)
		}
		if again, err := Canonical(want); err != nil || !bytes.Equal(again, want) {
			t.Fatalf("Canonical(%q) = %q, %v; want %q (idempotent)", want, again, err, want)
		}
		for range renderings {
			other := renderJSON(r, obj)
			if got, err := Canonical(other); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("object %d: Canonical(%q) = %q, %v; want %q as for %q", i, other, got, err, want, first)
			}
		}
	}
}

// jsonNode is a JSON value for the property test: members keep their
// numbers' text, which map[string]any could not.
type jsonNode struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'l' literal
	text    string
	keys    []string
	members []*jsonNode
}

func randomObject(r *rand.Rand, depth int) *jsonNode {
	n := &jsonNode{kind: 'o'}
	seen := map[string]bool{}
	for range r.IntN(6) {
		k := randomString(r)
		if seen[k] {
			continue
		}
		seen[k] = true
		n.keys = append(n.keys, k)
		n.members = append(n.members, randomValue(r, depth+1))
	}
	return n
}

func randomValue(r *rand.Rand, depth int) *jsonNode {
	switch k := r.IntN(7); {
	case k == 0 && depth < 5:
		return randomObject(r, depth)
	case k == 1 && depth < 5:
		n := &jsonNode{kind: 'a'}
		for range r.IntN(4) {
			n.members = append(n.members, randomValue(r, depth+1))
		}
		return n
	case k == 2:
		return &jsonNode{kind: 'l', text: []string{"true", "false", "null"}[r.IntN(3)]}
	case k == 3 || k == 4:
		nums := []string{"0", "-0", "3", "3.0", "1.50", "97", "-1.0", "1e2", "1E+2", "2.5e-3", "123456789012345678901234567890"}
		return &jsonNode{kind: 'n', text: nums[r.IntN(len(nums))]}
	}
	return &jsonNode{kind: 's', text: randomString(r)}
}

func randomString(r *rand.Rand) string {
	alphabet := []rune{'a', 'b', 'Z', '0', ' ', '"', '\\', '/', '\n', '\x00', '\x1f', '\x7f', 0x80, 0xe9, 0x20ac, 0xfb33, 0x1f600, 0x2028, 0xfffd}
	var b strings.Builder
	for range r.IntN(5) {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func renderJSON(r *rand.Rand, n *jsonNode) []byte {
	var b []byte
	space := func() {
		for range r.IntN(3) {
			b = append(b, " \t\r\n"[r.IntN(4)])
		}
	}
	var render func(n *jsonNode)
	render = func(n *jsonNode) {
		space()
		switch n.kind {
		case 'o', 'a':
			open, close := byte('{'), byte('}')
			if n.kind == 'a' {
				open, close = '[', ']'
			}
			b = append(b, open)
			order := r.Perm(len(n.members))
			if n.kind == 'a' {
				order = order[:0]
				for i := range n.members {
					order = append(order, i)
				}
			}
			for j, i := range order {
				if j > 0 {
					b = append(b, ',')
				}
				if n.kind == 'o' {
					space()
					b = appendRandomString(r, b, n.keys[i])
					space()
					b = append(b, ':')
				}
				render(n.members[i])
			}
			space()
			b = append(b, close)
		case 's':
			b = appendRandomString(r, b, n.text)
		default:
			b = append(b, n.text...)
		}
		space()
	}
	render(n)
	return b
}

// appendRandomString writes s as a JSON string, each rune either raw (where
// JSON allows) or escaped in one of the forms JSON allows.
func appendRandomString(r *rand.Rand, b []byte, s string) []byte {
	b = append(b, '"')
	for _, c := range s {
		short := map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\n': `\n`}[c]
		switch {
		case short != "" && r.IntN(2) == 0:
			b = append(b, short...)
		case c == '"' || c == '\\' || c < 0x20 || r.IntN(3) == 0:
			for _, u := range utf16Units(c) {
				b = append(b, `\u`...)
				hex := strconv.FormatUint(uint64(u), 16)
				if r.IntN(2) == 0 {
					hex = strings.ToUpper(hex)
				}
				b = append(b, strings.Repeat("0", 4-len(hex))+hex...)
			}
		default:
			b = append(b, string(c)...)
		}
	}
	return append(b, '"')
}

func utf16Units(c rune) []uint16 {
	if c < 0x10000 {
		return []uint16{uint16(c)}
	}
	c -= 0x10000
	return []uint16{uint16(0xd800 + c>>10), uint16(0xdc00 + c&0x3ff)}
}

// FuzzCanonical checks that Canonical never panics, refuses only with 400 or
// 413, and that what it accepts means to encoding/json what its output
// means, that output being valid JSON and its own canonical form.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":[1.50,-0,1E+2,"\u00e9\ud83d\ude00"]}`, `{"signature":"x","a":{"signature":1}}`,
		`{"a":1,"a":2}`, `{"\ud800":1}`, "{\"a\":\"\xff\"}", `{"a":[[[[]]]]}`} {
		f.Add([]byte(s))
	}
	for _, dir := range goldenCases(f) {
		if b, err := os.ReadFile(filepath.Join(dir, "input.json")); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonical(in)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || (pe.Status != StatusBadRequest && pe.Status != StatusTooLarge) {
				t.Fatalf("Canonical(%q) error %v, want a 400 or 413 refusal", in, err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Canonical(%q) = %q, not valid JSON", in, out)
		}
		if again, err := Canonical(out); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Canonical(%q) = %q, %v; want %q", out, again, err, out)
		}
		want := decodeLoose(t, in)
		delete(want.(map[string]any), sigMemberName)
		if got := decodeLoose(t, out); !reflect.DeepEqual(got, want) {
			t.Fatalf("Canonical(%q) = %q, which decodes to %v, want %v", in, out, got, want)
		}
		sig := "ed25519:" + strings.Repeat("0", 128)
		signed, err := SetSignature(in, sig)
		if err != nil {
			t.Fatalf("SetSignature(%q) error: %v", in, err)
		}
		if got, err := Canonical(signed); err != nil || !bytes.Equal(got, out) {
			t.Fatalf("Canonical(SetSignature(%q)) = %q, %v; want %q", in, got, err, out)
		}
	})
}

// decodeLoose decodes JSON with encoding/json, numbers as their text.
func decodeLoose(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("encoding/json refuses %q, which Canonical accepted: %v", b, err)
	}
	return v
}
