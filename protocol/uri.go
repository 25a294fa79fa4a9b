package protocol

import (
	"encoding/json"
	"strconv"
	"strings"
)

// URI schemes of AGLX addresses.
const (
	SchemeAgent    = "agent"
	SchemeRegistry = "registry"
)

// Bounds on an address. They are DNS's, since a NAME is host-like and
// operators will want to use real host names.
const (
	// URINameSizeMax bounds the host part of NAME, port excluded.
	URINameSizeMax = 253 // bytes
	// uriLabelSizeMax bounds one dot-separated label of the host part.
	uriLabelSizeMax = 63 // bytes
)

// URI is an AGLX address: agent://NAME or registry://NAME. NAME is a host
// name with an optional :port. Ledger accounts are keyed by URI, so a URI has
// exactly one spelling: ParseURI lower-cases NAME (host names compare without
// regard to case) and refuses everything that could make two strings name
// one agent, such as paths, user info, queries or a trailing dot.
//
// The zero URI stands for "no address" (a missing TO).
type URI struct {
	Scheme string // SchemeAgent or SchemeRegistry
	Name   string // host[:port], lower case
}

// ParseURI parses an address as found in FROM, TO and agent_uri. A refusal is
// a *Error with StatusBadRequest whose reason starts with the quoted input,
// so that the caller can put the header or field name in front of it.
func ParseURI(s string) (URI, error) {
	u, why := parseURI(s)
	if why != "" {
		return URI{}, Errorf(StatusBadRequest, "%s %s", quoteValue(s), why)
	}
	return u, nil
}

// uriExpected ends every address refusal: the one thing a sender needs to
// know to fix it.
const uriExpected = "expected agent://NAME or registry://NAME"

// parseURI returns the URI, or the reason s is not one, phrased to follow
// the quoted input ("is not an AGLX address (...); expected ...").
func parseURI(s string) (URI, string) {
	scheme, name, ok := strings.Cut(s, "://")
	if !ok {
		return URI{}, "is not an AGLX address; " + uriExpected
	}
	if scheme != SchemeAgent && scheme != SchemeRegistry {
		return URI{}, "is not an AGLX address (unknown scheme " + quoteValue(scheme) + "; schemes are lower case); " + uriExpected
	}
	if why := checkURIName(name); why != "" {
		return URI{}, "is not an AGLX address (" + why + "); " + uriExpected
	}
	return URI{Scheme: scheme, Name: strings.ToLower(name)}, ""
}

// checkURIName checks host[:port] and says what is wrong, or returns "".
func checkURIName(name string) string {
	if name == "" {
		return "the name is empty"
	}
	host, port, hasPort := strings.Cut(name, ":")
	if why := checkHost(host); why != "" {
		return why
	}
	if hasPort {
		return checkPort(port)
	}
	return ""
}

// checkHost checks the host part of NAME and says what is wrong, or returns "".
func checkHost(host string) string {
	if host == "" {
		return "the name is empty"
	}
	if len(host) > URINameSizeMax {
		return "the name is longer than " + strconv.Itoa(URINameSizeMax) + " bytes"
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		case c == '/':
			return "a path is not allowed"
		case c == '@':
			return "user information is not allowed"
		case c == '?' || c == '#':
			return "a query or fragment is not allowed"
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			return "white space is not allowed"
		default:
			return "the name may hold only letters, digits, '-', '_' and '.'"
		}
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" {
			return "the name has an empty label"
		}
		if len(label) > uriLabelSizeMax {
			return "a label is longer than " + strconv.Itoa(uriLabelSizeMax) + " bytes"
		}
	}
	return ""
}

// checkPort accepts 1 to 65535 written without leading zeros, so that one
// port has one spelling.
func checkPort(port string) string {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "the port must be a number from 1 to 65535"
	}
	return ""
}

// String returns the address in its one canonical spelling, or "" for the
// zero URI.
func (u URI) String() string {
	if u.Scheme == "" {
		return ""
	}
	return u.Scheme + "://" + u.Name
}

// IsZero reports whether u is the zero URI (no address). It also lets
// encoding/json's omitzero option leave absent addresses out.
func (u URI) IsZero() bool { return u == URI{} }

// MarshalJSON writes the address as a JSON string.
func (u URI) MarshalJSON() ([]byte, error) { return json.Marshal(u.String()) }

// UnmarshalJSON reads an address from a JSON string.
func (u *URI) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &valueError{uriNotString}
	}
	parsed, why := parseURIValue(s)
	if why != "" {
		return &valueError{why}
	}
	*u = parsed
	return nil
}

// uriNotString refuses a JSON value that is not a string.
const uriNotString = "must be a string holding agent://NAME or registry://NAME"

// parseURIValue is parseURI for an address read from a body, its reason
// phrased to follow the name of the field: `holds "agent:/x", which is not
// an AGLX address; ...`.
func parseURIValue(s string) (URI, string) {
	u, why := parseURI(s)
	if why != "" {
		return URI{}, "holds " + quoteValue(s) + ", which " + why
	}
	return u, ""
}
