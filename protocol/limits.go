package protocol

// Limits on what one frame may hold. Each is a bound on memory that a single
// peer can make the node spend, so each is small enough that the product with
// the connection limit still fits in RAM. The unit is the last word of the name.
const (
	// HeaderLineSizeMax bounds one start or header line, line end excluded.
	HeaderLineSizeMax = 8 << 10 // bytes
	// HeaderCountMax bounds the header lines of one frame.
	HeaderCountMax = 64 // headers
	// HeaderCountKeptMax bounds the header lines, CONTENT-LENGTH and
	// RELAYED-BY aside, of a frame the node accepts: when it writes the frame on it adds a
	// CONTENT-LENGTH, and a relay a RELAYED-BY. Accepted at 64, a frame
	// written on had 66, and the next node refused it whole.
	HeaderCountKeptMax = HeaderCountMax - 2 // headers
	// BodySizeMaxDefault is the default bound on one JSON body. A Decoder may
	// be given another (DecoderOptions.BodySizeMax).
	BodySizeMaxDefault = 1 << 20 // bytes
	// BodySizeMaxLimit is the largest body bound a node may be configured with;
	// JetStream's message size must stay above it.
	BodySizeMaxLimit = 8 << 20 // bytes
	// BodySizeMaxMin is the smallest body bound a node may be configured
	// with: below it, ordinary messages of the reference would not fit.
	BodySizeMaxMin = 1024 // bytes
	// JSONDepthMax bounds the nesting of objects and arrays in a body, so that
	// no later recursive walk over it can exhaust the stack.
	JSONDepthMax = 64 // levels
	// LeadingBlankSizeMax bounds the white space tolerated between frames.
	LeadingBlankSizeMax = 64 << 10 // bytes
	// ParsedSizePerBodyByteMax bounds the memory a parsed payload takes,
	// per byte of its body: a list of one-letter strings, 4 bytes each on
	// the wire ("a",), takes a string header and an allocation each once
	// decoded, about 4 bytes of heap per byte of body (TestParsedPayloadSize
	// holds every list-bearing TYPE to it). Bounds on frames in memory
	// count it (Frame.MemorySize): counting wire bytes alone let a bound
	// of 256 MiB hold some 1.3 GB.
	ParsedSizePerBodyByteMax = 5 // bytes per byte
)

// MemorySize bounds what f takes in memory once parsed: its bytes as read
// and its decoded payload. It is what the node's byte bounds on frames in
// flight and on recent events count.
func (f *Frame) MemorySize() int64 {
	if f == nil {
		return 0
	}
	return MemorySize(f.Headers, f.Body)
}

// MemorySize is Frame.MemorySize of a frame with these headers and body.
func MemorySize(headers []Header, body []byte) int64 {
	n := int64(len(body))*(1+ParsedSizePerBodyByteMax) + 16
	for _, h := range headers {
		n += int64(len(h.Name) + len(h.Value) + 3)
	}
	return n
}

// Version is the only protocol version this node speaks.
const Version = "AGLX/1.0"
