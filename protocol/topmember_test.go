package protocol

import "testing"

func TestTopMember(t *testing.T) {
	tests := []struct {
		body, name, want string
		ok               bool
	}{
		{`{"timestamp": "2025-10-29T18:00:00Z", "a": 1}`, "timestamp", `"2025-10-29T18:00:00Z"`, true},
		{`{"a": {"timestamp": 1}}`, "timestamp", ``, false},
		{`{"times\u0074amp": 7}`, "timestamp", `7`, true},
		{`{"timestamp": 1, "timestamp": 2}`, "timestamp", ``, false},
		{`[1]`, "timestamp", ``, false},
		{`{"timestamp": }`, "timestamp", ``, false},
		{`{"x": [1, {"y": 2}], "timestamp": null}`, "timestamp", `null`, true},
	}
	for _, tc := range tests {
		got, ok := TopMember([]byte(tc.body), tc.name)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("TopMember(%q, %q) = %q, %v; want %q, %v", tc.body, tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
