package events

import (
	"strings"
	"testing"
)

func TestSubject(t *testing.T) {
	tests := []struct{ typ, from, to, want string }{
		{"task.assign", "agent://alpha.local", "agent://beta.local", "aglx.ev.task.assign.agent~alpha_local.agent~beta_local"},
		{"agent.announce", "agent://node15.local", "", "aglx.ev.agent.announce.agent~node15_local.none"},
		{"ack", "registry://global.aglx.net", "agent://a", "aglx.ev.ack._.registry~global_aglx_net.agent~a"},
		{"plan.approval.response", "agent://a_b", "agent://a.b:80", "aglx.ev.plan.approval_response.agent~a=5Fb.agent~a_b=3A80"},
	}
	for _, tc := range tests {
		if got := Subject(tc.typ, tc.from, tc.to); got != tc.want {
			t.Errorf("Subject(%q, %q, %q) = %q, want %q", tc.typ, tc.from, tc.to, got, tc.want)
		}
	}
}

// TestURITokenInjective checks pairs that a naive encoding would merge.
func TestURITokenInjective(t *testing.T) {
	uris := []string{
		"agent://a.b", "agent://a_b", "agent://a=2Eb", "agent://a~b", "registry://a.b",
		"agent://A.b", "agent://a.b.", "agent://a..b", "agent://a__b", "agent://a%2Eb",
		"agent://x/y", "agent://x y", "agent://x*", "agent://x>", "agent://ü",
	}
	seen := map[string]string{}
	for _, u := range uris {
		tok := URIToken(u)
		if prev, dup := seen[tok]; dup {
			t.Fatalf("URIToken(%q) = URIToken(%q) = %q", u, prev, tok)
		}
		seen[tok] = u
		if strings.ContainsAny(tok, ".*> \t") {
			t.Fatalf("URIToken(%q) = %q holds a subject metacharacter", u, tok)
		}
		back, err := ParseURIToken(tok)
		if err != nil || back != u {
			t.Fatalf("ParseURIToken(%q) = %q, %v; want %q", tok, back, err, u)
		}
	}
}

func TestRecipientOf(t *testing.T) {
	tests := []struct{ subject, want string }{
		{Subject("task.assign", "agent://a.local", "agent://b_c.local"), "agent://b_c.local"},
		{Subject("agent.announce", "agent://a.local", ""), ""},
		{Subject("ack", "registry://n", "agent://x:1"), "agent://x:1"},
	}
	for _, tc := range tests {
		if got, err := RecipientOf(tc.subject); err != nil || got != tc.want {
			t.Errorf("RecipientOf(%q) = %q, %v; want %q", tc.subject, got, err, tc.want)
		}
	}
	if _, err := RecipientOf("other.subject"); err == nil {
		t.Error("RecipientOf accepted a foreign subject")
	}
}

func FuzzURIToken(f *testing.F) {
	for _, s := range []string{"agent://alpha.local", "registry://x_y=z~w", "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		if !strings.Contains(uri, "://") {
			return
		}
		tok := URIToken(uri)
		if strings.ContainsAny(tok, ".*> \t\r\n") {
			t.Fatalf("URIToken(%q) = %q holds a subject metacharacter", uri, tok)
		}
		back, err := ParseURIToken(tok)
		if err != nil || back != uri {
			t.Fatalf("ParseURIToken(URIToken(%q)) = %q, %v", uri, back, err)
		}
	})
}
