package protocol

import "strings"

// Names of the headers the node itself reads or writes. Header names are
// case-insensitive on the wire; these are their canonical, upper-case forms.
const (
	HeaderFrom          = "FROM"
	HeaderTo            = "TO"
	HeaderType          = "TYPE"
	HeaderContentType   = "CONTENT-TYPE"
	HeaderContentLength = "CONTENT-LENGTH"
	HeaderCredits       = "CREDITS"
	HeaderStatus        = "STATUS"
	HeaderID            = "ID"
	HeaderInReplyTo     = "IN-REPLY-TO"
	// HeaderRelayedBy marks a frame a node delivers on behalf of its
	// sender (the relay, in package bridge).
	HeaderRelayedBy = "RELAYED-BY"
)

// Transports named on a start line.
const (
	TransportTCP = "TCP"
	TransportUDP = "UDP"
)

// Header is one header line as received: Name keeps the sender's spelling so
// that a stored frame shows exactly what arrived.
type Header struct {
	Name  string
	Value string
}

// Frame is one AGLX message: the start line, the headers in the order they
// arrived (unknown ones included), and the body bytes exactly as received.
type Frame struct {
	// Transport is the transport named on the start line, upper case. It is
	// what the sender claims, not necessarily what carried the frame.
	Transport string
	Headers   []Header
	// Body is the JSON value as received, from its first byte to its last,
	// or nil for a frame without a body (CONTENT-LENGTH: 0).
	Body []byte
	// LengthMismatch is set when a CONTENT-LENGTH header disagrees with the
	// length of the JSON value. The JSON value wins (docs/PROTOCOL.md).
	LengthMismatch bool
}

// Get returns the value of the first header whose name matches name without
// regard to case, and whether there was one.
func (f *Frame) Get(name string) (string, bool) {
	for _, h := range f.Headers {
		if strings.EqualFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

// Value returns the value of header name, or "" if it is absent.
func (f *Frame) Value(name string) string {
	v, _ := f.Get(name)
	return v
}

// Set replaces the value of header name, or appends the header if absent.
func (f *Frame) Set(name, value string) {
	for i, h := range f.Headers {
		if strings.EqualFold(h.Name, name) {
			f.Headers[i].Value = value
			return
		}
	}
	f.Headers = append(f.Headers, Header{Name: name, Value: value})
}

// Type is the TYPE header.
func (f *Frame) Type() string { return f.Value(HeaderType) }

// From is the FROM header.
func (f *Frame) From() string { return f.Value(HeaderFrom) }

// To is the TO header; it is empty on a broadcast such as agent.announce.
func (f *Frame) To() string { return f.Value(HeaderTo) }

// ID is the sender's ID header, if it gave one.
func (f *Frame) ID() string { return f.Value(HeaderID) }
