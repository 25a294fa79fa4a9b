package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseTimestamp(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2025-10-29T18:22:04Z", time.Date(2025, 10, 29, 18, 22, 4, 0, time.UTC)},
		{"2025-10-29T20:22:04+02:00", time.Date(2025, 10, 29, 18, 22, 4, 0, time.UTC)},
		{"2025-10-29T18:22:04.5Z", time.Date(2025, 10, 29, 18, 22, 4, 5e8, time.UTC)},
		{"2025-10-29T18:22:04.123456789Z", time.Date(2025, 10, 29, 18, 22, 4, 123456789, time.UTC)},
		// RFC 3339 allows "t" and "z" in lower case.
		{"2025-10-29t18:22:04Z", time.Date(2025, 10, 29, 18, 22, 4, 0, time.UTC)},
		{"2025-10-29T18:22:04z", time.Date(2025, 10, 29, 18, 22, 4, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTimestamp(tt.in)
			if err != nil || !got.Equal(tt.want) || got.Text != tt.in {
				t.Fatalf("ParseTimestamp(%q) = %v, %v, want %v", tt.in, got, err, tt.want)
			}
			// The text goes back out unchanged, offset and all.
			out, err := json.Marshal(got)
			if want := `"` + tt.in + `"`; err != nil || string(out) != want {
				t.Errorf("json.Marshal(%v) = %s, %v, want %s", got, out, err, want)
			}
		})
	}
}

func TestParseTimestampRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"2025-10-29",
		"2025-10-29 18:22:04Z",
		"2025-10-29T18:22:04",
		"29.10.2025 18:22",
		"2025-13-01T00:00:00Z",
		"2025-10-29T25:00:00Z",
		"1761765000",
		"2025-10-29T18:22:04,5Z",
		"2025-10-29T8:22:04Z", // a one-digit hour: time.Parse takes it
		"2025-10-29T08:22:04.Z",
		"2025-10-29T18:22:04+24:00",
		"2025-10-29T18:22:04+01:60",
		"2025-10-29T18:22:04Z" + strings.Repeat(" ", 60),
	} {
		t.Run(in, func(t *testing.T) {
			got, err := ParseTimestamp(in)
			if StatusOf(err) != StatusBadRequest {
				t.Errorf("ParseTimestamp(%q) = %v, %v, want a 400", in, got, err)
			}
		})
	}
}

func TestTimestampJSON(t *testing.T) {
	var v struct {
		T Timestamp `json:"t"`
		Z Timestamp `json:"z,omitzero"`
	}
	for _, in := range []string{`{"t": 1761765000}`, `{"t": "yesterday"}`, `{"t": true}`} {
		if err := json.Unmarshal([]byte(in), &v); StatusOf(err) != StatusBadRequest {
			t.Errorf("json.Unmarshal(%s) = %v, want a 400", in, err)
		}
	}
	if err := json.Unmarshal([]byte(`{"t": "2025-10-29T18:22:04+00:00"}`), &v); err != nil {
		t.Fatalf("json.Unmarshal = %v", err)
	}
	out, err := json.Marshal(v)
	if want := `{"t":"2025-10-29T18:22:04+00:00"}`; err != nil || string(out) != want {
		t.Errorf("json.Marshal = %s, %v, want %s", out, err, want)
	}
	// A Timestamp built from a time.Time alone is written in RFC 3339.
	built := Timestamp{Time: time.Date(2025, 10, 29, 18, 22, 4, 0, time.UTC)}
	if out, _ := json.Marshal(built); string(out) != `"2025-10-29T18:22:04Z"` {
		t.Errorf("json.Marshal(%v) = %s", built.Time, out)
	}
}

// FuzzTimestampJSON holds UnmarshalJSON's shortcut for plain strings to
// what encoding/json gives: for any input, the same time or the same
// refusal as decoding the JSON string first and parsing its text.
func FuzzTimestampJSON(f *testing.F) {
	for _, s := range []string{`"2025-10-29T18:22:04Z"`, `"2025-10-29T18:22:04.5+02:00"`, `"2025-10-29T18:22:04\u005a"`,
		`null`, `12`, `"2025-10-29T18:22:04Z`, ` "2025-10-29T18:22:04Z" `, `"\u0000"`, "\"2025-10-29T18:22:04Z\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Timestamp
		gotErr := got.UnmarshalJSON(b)
		var want Timestamp
		var wantErr error
		var s string
		switch {
		case string(b) == "null":
		case json.Unmarshal(b, &s) != nil:
			wantErr = &valueError{timestampNotString}
		default:
			var why string
			if want, why = parseTimestamp(s); why != "" {
				wantErr = &valueError{why}
			}
		}
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) || !got.Time.Equal(want.Time) {
			t.Fatalf("UnmarshalJSON(%q) = %v, %v; want %v, %v", b, got, gotErr, want, wantErr)
		}
	})
}
