package protocol

// Limits on what one frame may hold. Each is a bound on memory that a single
// peer can make the node spend, so each is small enough that the product with
// the connection limit still fits in RAM. The unit is the last word of the name.
const (
	// HeaderLineSizeMax bounds one start or header line, line end excluded.
	HeaderLineSizeMax = 8 << 10 // bytes
	// HeaderCountMax bounds the header lines of one frame.
	HeaderCountMax = 64 // headers
	// BodySizeMaxDefault is the default bound on one JSON body. A Decoder may
	// be given another (DecoderOptions.BodySizeMax).
	BodySizeMaxDefault = 1 << 20 // bytes
	// BodySizeMaxLimit is the largest body bound a node may be configured with;
	// JetStream's message size must stay above it.
	BodySizeMaxLimit = 8 << 20 // bytes
	// JSONDepthMax bounds the nesting of objects and arrays in a body, so that
	// no later recursive walk over it can exhaust the stack.
	JSONDepthMax = 64 // levels
	// LeadingBlankSizeMax bounds the white space tolerated between frames.
	LeadingBlankSizeMax = 64 << 10 // bytes
)

// Version is the only protocol version this node speaks.
const Version = "AGLX/1.0"
