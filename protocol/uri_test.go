package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		in   string
		want URI
	}{
		{"agent://alpha.local", URI{SchemeAgent, "alpha.local"}},
		{"registry://global.aglx.net", URI{SchemeRegistry, "global.aglx.net"}},
		{"agent://localhost", URI{SchemeAgent, "localhost"}},
		{"agent://node_1-a.local:2594", URI{SchemeAgent, "node_1-a.local:2594"}},
		{"agent://Alpha.LOCAL", URI{SchemeAgent, "alpha.local"}}, // one agent, one spelling
		{"agent://10.1.0.42:65535", URI{SchemeAgent, "10.1.0.42:65535"}},
		{"agent://" + strings.Repeat("a", 63) + ".b", URI{SchemeAgent, strings.Repeat("a", 63) + ".b"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseURI(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("ParseURI(%q) = %v, %v, want %v", tt.in, got, err, tt.want)
			}
			if again, err := ParseURI(got.String()); err != nil || again != got {
				t.Errorf("ParseURI(%q) = %v, %v, want %v", got.String(), again, err, got)
			}
		})
	}
}

func TestParseURIRejects(t *testing.T) {
	long := strings.Repeat("a.", 127) + "a" // 255 bytes
	tests := []struct {
		in, want string
	}{
		{"agent:/x", `"agent:/x" is not an AGLX address; expected agent://NAME or registry://NAME`},
		{"", `"" is not an AGLX address`},
		{"alpha.local", "is not an AGLX address"},
		{"AGENT://alpha", `unknown scheme "AGENT"`},
		{"http://alpha", `unknown scheme "http"`},
		{"agent://", "the name is empty"},
		{"agent://:80", "the name is empty"},
		{"agent://a..b", "empty label"},
		{"agent://.a", "empty label"},
		{"agent://a.", "empty label"},
		{"agent://a/b", "a path is not allowed"},
		{"agent://a/", "a path is not allowed"},
		{"agent://u@h", "user information is not allowed"},
		{"agent://h?q=1", "a query or fragment is not allowed"},
		{"agent://h#f", "a query or fragment is not allowed"},
		{"agent://a b", "white space is not allowed"},
		{"agent://a\tb", "white space is not allowed"},
		{" agent://a", "unknown scheme"},
		{"agent://h:0", "the port must be a number from 1 to 65535"},
		{"agent://h:65536", "the port must be"},
		{"agent://h:080", "the port must be"},
		{"agent://h:", "the port must be"},
		{"agent://h:1:2", "the port must be"},
		{"agent://héllo", "may hold only letters"},
		{"agent://[::1]", "may hold only letters"},
		{"agent://" + long, "longer than 253 bytes"},
		{"agent://" + strings.Repeat("a", 64), "a label is longer than 63 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseURI(tt.in)
			var e *Error
			if !errors.As(err, &e) || e.Status != StatusBadRequest || !strings.Contains(e.Reason, tt.want) {
				t.Fatalf("ParseURI(%q) = %v, %v, want a 400 containing %q", tt.in, got, err, tt.want)
			}
			if !strings.HasSuffix(e.Reason, uriExpected) {
				t.Errorf("ParseURI(%q) reason %q does not end with %q", tt.in, e.Reason, uriExpected)
			}
		})
	}
}

func TestURIJSON(t *testing.T) {
	var v struct {
		U URI `json:"u"`
		Z URI `json:"z,omitzero"`
	}
	if err := json.Unmarshal([]byte(`{"u": "registry://Global.aglx.net"}`), &v); err != nil {
		t.Fatalf("json.Unmarshal = %v", err)
	}
	out, err := json.Marshal(v)
	if want := `{"u":"registry://global.aglx.net"}`; err != nil || string(out) != want {
		t.Errorf("json.Marshal(%v) = %s, %v, want %s", v, out, err, want)
	}
	if err := json.Unmarshal([]byte(`{"u": "agent:/x"}`), &v); StatusOf(err) != StatusBadRequest {
		t.Errorf("json.Unmarshal(agent:/x) = %v, want a 400", err)
	}
	if (URI{}).String() != "" || !(URI{}).IsZero() {
		t.Errorf("the zero URI is not empty")
	}
}
