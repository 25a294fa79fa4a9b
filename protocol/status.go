package protocol

import (
	"errors"
	"fmt"
)

// Status is an AGLX reply status. The codes borrow HTTP's meanings so that
// an operator reading a log line or a client author reading a reply needs no
// new vocabulary (AGLX-NOTES.md section 5).
type Status int

// The statuses the node uses. Anything else is a programming error.
const (
	StatusOK                 Status = 200 // done
	StatusAccepted           Status = 202 // recorded; the addressee has not acted yet
	StatusBadRequest         Status = 400 // malformed or invalid
	StatusUnauthorized       Status = 401 // bad or missing signature
	StatusPaymentRequired    Status = 402 // not enough credits
	StatusForbidden          Status = 403 // not allowed
	StatusNotFound           Status = 404 // unknown reference
	StatusConflict           Status = 409 // conflicting duplicate
	StatusTooLarge           Status = 413 // a limit was exceeded
	StatusTooManyRequests    Status = 429 // rate limited
	StatusUnavailable        Status = 503 // the event log cannot take the message
	StatusVersionUnsupported Status = 505 // not AGLX/1.0
)

var statusText = map[Status]string{
	StatusOK:                 "OK",
	StatusAccepted:           "Accepted",
	StatusBadRequest:         "Bad Request",
	StatusUnauthorized:       "Unauthorized",
	StatusPaymentRequired:    "Payment Required",
	StatusForbidden:          "Forbidden",
	StatusNotFound:           "Not Found",
	StatusConflict:           "Conflict",
	StatusTooLarge:           "Too Large",
	StatusTooManyRequests:    "Too Many Requests",
	StatusUnavailable:        "Service Unavailable",
	StatusVersionUnsupported: "Version Not Supported",
}

// Text is the reason phrase written after the code in a STATUS header.
func (s Status) Text() string {
	if t, ok := statusText[s]; ok {
		return t
	}
	return "Unknown"
}

// String renders the status as it appears in a STATUS header: "200 OK".
func (s Status) String() string { return fmt.Sprintf("%d %s", int(s), s.Text()) }

// Error is a refusal of one frame. It carries the status the reply gets and a
// reason written for the person who reads the reply, not for the programmer.
type Error struct {
	Status Status
	Reason string
	// Fatal is set when the byte stream can no longer be split into frames
	// with confidence (garbage, an oversized line, JSON that never ends). The
	// bridge answers and then closes the connection, because reading on would
	// risk taking the middle of one frame for the start of the next.
	Fatal bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", int(e.Status), e.Status.Text(), e.Reason)
}

// ReasonOf is the sentence a person reads for err: a refusal's reason
// without its status, which means something in a reply and nothing in a
// flag's error; anything else's text.
func ReasonOf(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}

// Errorf builds a recoverable refusal: the frame's end is known, so the
// connection can go on with the next frame.
func Errorf(status Status, format string, args ...any) *Error {
	return &Error{Status: status, Reason: fmt.Sprintf(format, args...)}
}

// fatalf builds a refusal after which the framing is lost.
func fatalf(status Status, format string, args ...any) *Error {
	return &Error{Status: status, Reason: fmt.Sprintf(format, args...), Fatal: true}
}

// StatusOf extracts the AGLX status of err: the status of a *Error anywhere in
// its chain, or 503 for anything else, since an error that is not about the
// frame is about the node.
func StatusOf(err error) Status {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Status
	}
	return StatusUnavailable
}
