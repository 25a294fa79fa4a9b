package protocol

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Generic and handshake payloads, and the rules every payload's Validate is
// built from.

// Ack is ack: a receipt. Agents put various things in it, so no field is
// required and unknown ones are ignored; the fields the node writes into its
// own acks are typed. An ack is never answered (TypeInfo.NoReply).
type Ack struct {
	// EventID is the event-log id of the message acknowledged.
	EventID string `json:"event_id,omitempty"`
	// Seq is its position in the log.
	Seq *uint64 `json:"seq,omitempty"`
	// Duplicate is set when the message acknowledged was a resend of one
	// already stored (docs/PROTOCOL.md, "Replies").
	Duplicate bool `json:"duplicate,omitempty"`
}

// Validate checks the form of event_id when present.
func (p *Ack) Validate() error {
	var c fieldCheck
	c.id("event_id", p.EventID, false)
	return c.result()
}

// ErrorPayload is error: a refusal. It is named so because *Error is the
// node's own refusal value. An error is never answered (TypeInfo.NoReply).
type ErrorPayload struct {
	// Status is an AGLX status code, if the sender gives one.
	Status *int64 `json:"status,omitempty"`
	Reason string `json:"reason"`
}

// Validate requires reason, the only part a person can act on; status, if
// given, is an HTTP-like code from 100 to 599.
func (p *ErrorPayload) Validate() error {
	var c fieldCheck
	c.integer("status", p.Status, false, 100, 599)
	c.text("reason", p.Reason)
	return c.result()
}

// The handshakes of AGLX-NOTES.md section 3. Each request carries a unique
// request_id, which its response repeats; approve is a JSON boolean that
// must be present, since a missing answer is not a "no".

// ShutdownRequest is shutdown.request: the lead asks a teammate to stop.
type ShutdownRequest struct {
	RequestID string `json:"request_id"`
	Reason    string `json:"reason,omitempty"`
}

// Validate requires request_id.
func (p *ShutdownRequest) Validate() error {
	var c fieldCheck
	c.id("request_id", p.RequestID, true)
	return c.result()
}

// ShutdownResponse is shutdown.response: the teammate agrees to stop, or
// refuses (for instance while busy) and says why.
type ShutdownResponse struct {
	RequestID string `json:"request_id"`
	Approve   *bool  `json:"approve"`
	Reason    string `json:"reason,omitempty"`
}

// Validate requires request_id and approve.
func (p *ShutdownResponse) Validate() error {
	var c fieldCheck
	c.id("request_id", p.RequestID, true)
	if p.Approve == nil {
		c.missing("approve")
	}
	return c.result()
}

// PlanApproval is plan.approval: a teammate submits a plan before a large
// action.
type PlanApproval struct {
	RequestID string `json:"request_id"`
	Plan      string `json:"plan"`
}

// Validate requires request_id and plan.
func (p *PlanApproval) Validate() error {
	var c fieldCheck
	c.id("request_id", p.RequestID, true)
	c.text("plan", p.Plan)
	return c.result()
}

// PlanApprovalResponse is plan.approval.response: the lead approves or
// rejects a plan, with feedback.
type PlanApprovalResponse struct {
	RequestID string `json:"request_id"`
	Approve   *bool  `json:"approve"`
	Feedback  string `json:"feedback,omitempty"`
}

// Validate requires request_id and approve.
func (p *PlanApprovalResponse) Validate() error {
	var c fieldCheck
	c.id("request_id", p.RequestID, true)
	if p.Approve == nil {
		c.missing("approve")
	}
	return c.result()
}

// IDSizeMax bounds an identifier in a body (task_id, transaction_id,
// agent_id, request_id, ...). Identifiers become keys of maps, logs and
// deduplication windows, so each must be short and printable.
const IDSizeMax = 128 // bytes

// Bounds on what the registry and the mentor directory keep of an agent
// for as long as it is known: its name, type, status and address, its
// capabilities or expertise. A body may be 1 MiB, and without these one
// sender could make every one of up to a million agents hold that much
// (and each status change again, in the history). With them an entry is
// at most some 9 KB.
const (
	// LabelSizeMax bounds one name, type, status, capability or
	// expertise.
	LabelSizeMax = 128 // bytes
	// LabelsMax bounds a list of capabilities or expertise.
	LabelsMax = 32 // labels
	// AddressSizeMax bounds a registered address: a DNS name is at most
	// 253 bytes.
	AddressSizeMax = 255 // bytes
)

// signatureSizeMax bounds a signature field: "rsa-sha256:" and the hex of an
// 8192-bit RSA signature fit with room to spare.
const signatureSizeMax = 4200 // bytes

// Signature algorithms (AGLX-NOTES.md section 4). hmac-sha256 is only for
// zone membership secrets (zone.join).
var (
	sigAlgsKey  = []string{"rsa-sha256", "ed25519"}
	sigAlgsZone = []string{"hmac-sha256"}
)

// fieldCheck collects the first reason a payload is invalid, so that each rule of
// a Validate method is one line and the first broken rule is the one reported.
type fieldCheck struct{ err *Error }

func (c *fieldCheck) failf(format string, args ...any) {
	if c.err == nil {
		c.err = Errorf(StatusBadRequest, format, args...)
	}
}

func (c *fieldCheck) result() error {
	if c.err == nil {
		return nil
	}
	return c.err
}

func (c *fieldCheck) missing(name string) { c.failf("field %q is required", name) }

// text requires a non-empty string.
func (c *fieldCheck) text(name, v string) {
	if v == "" {
		c.missing(name)
	}
}

// id checks an identifier: 1 to IDSizeMax bytes of visible ASCII.
func (c *fieldCheck) id(name, v string, required bool) {
	switch {
	case v == "":
		if required {
			c.missing(name)
		}
	case len(v) > IDSizeMax:
		c.failf("field %q is longer than %d bytes", name, IDSizeMax)
	case !visibleASCII(v):
		c.failf("field %q may hold only visible ASCII characters, without spaces", name)
	}
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// amountRule is the sign a money field must have.
type amountRule int

const (
	amountAnySign     amountRule = iota // a balance
	amountPositive                      // an amount paid, requested or approved
	amountNotZero                       // an adjustment
	amountNotNegative                   // a total
)

// amount checks a money field: present if required, within the bounds of an
// Amount (for one built in Go), and of the sign the rule demands.
func (c *fieldCheck) amount(name string, a *Amount, required bool, rule amountRule) {
	if a == nil {
		if required {
			c.missing(name)
		}
		return
	}
	if why := a.checkBounds(); why != "" {
		c.failf("field %q %s", name, why)
		return
	}
	switch s := a.Decimal().Sign(); {
	case rule == amountPositive && s <= 0:
		c.failf("field %q must be positive, got %s", name, quoteValue(a.String()))
	case rule == amountNotZero && s == 0:
		c.failf("field %q must not be zero", name)
	case rule == amountNotNegative && s < 0:
		c.failf("field %q must not be negative, got %s", name, quoteValue(a.String()))
	}
}

// timestamp requires a Timestamp if asked to, and checks that a Text set in
// Go is one the node would have accepted.
func (c *fieldCheck) timestamp(name string, t Timestamp, required bool) {
	switch {
	case t.IsZero():
		if required {
			c.missing(name)
		}
	case t.Text != "":
		if parsed, why := parseTimestamp(t.Text); why != "" {
			c.failf("field %q %s", name, why)
		} else if !parsed.Equal(t.Time) {
			c.failf("field %q holds text %s that does not match its time", name, quoteValue(t.Text))
		}
	}
}

// address requires a URI and checks that it is one ParseURI would return,
// for a payload built in Go rather than decoded.
func (c *fieldCheck) address(name string, u URI) {
	if u.IsZero() {
		c.missing(name)
		return
	}
	if parsed, why := parseURI(u.String()); why != "" || parsed != u {
		c.failf("field %q holds %s, which is not a canonical AGLX address", name, quoteValue(u.String()))
	}
}

// signature checks the form ALG:VALUE with ALG one of algs.
//
// The check is deliberately loose: VALUE need only be non-empty visible
// ASCII, not lowercase hex. The reference examples carry placeholders such as
// "rsa-sha256:0f3c9a..." that must parse at this layer; whether VALUE is hex
// of the right length is for the signature verifier to decide, together with
// whether it verifies.
func (c *fieldCheck) signature(name, sig string, required bool, algs []string) {
	if sig == "" {
		if required {
			c.missing(name)
		}
		return
	}
	alg, value, ok := strings.Cut(sig, ":")
	switch {
	case len(sig) > signatureSizeMax:
		c.failf("field %q is longer than %d bytes", name, signatureSizeMax)
	case !ok || value == "" || !visibleASCII(value):
		c.failf("field %q must be ALG:hex, with ALG one of %s", name, strings.Join(algs, ", "))
	case !slices.Contains(algs, alg):
		c.failf("field %q uses algorithm %s; expected one of %s", name, quoteValue(alg), strings.Join(algs, ", "))
	}
}

// integer checks an optional or required integer against [lo, hi].
func (c *fieldCheck) integer(name string, v *int64, required bool, lo, hi int64) {
	switch {
	case v == nil:
		if required {
			c.missing(name)
		}
	case *v < lo || *v > hi:
		c.failf("field %q must be from %d to %d, got %d", name, lo, hi, *v)
	}
}

// fraction checks a score or rating, which the reference writes as a number
// from 0 to 1 (0.93, or the 0.6 threshold of zone.deny).
func (c *fieldCheck) fraction(name string, v *float64, required bool) {
	switch {
	case v == nil:
		if required {
			c.missing(name)
		}
	case !(*v >= 0 && *v <= 1):
		c.failf("field %q must be from 0 to 1", name)
	}
}

// object checks that an optional raw member holds a JSON object.
func (c *fieldCheck) object(name string, raw json.RawMessage, required bool) {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	switch {
	case len(raw) == 0:
		if required {
			c.missing(name)
		}
	case raw[0] != '{':
		c.failf("field %q must be an object", name)
	}
}

// words checks a list of names (capabilities, expertise): if required, at
// least one; at most LabelsMax; each a label.
func (c *fieldCheck) words(name string, list []string, required bool) {
	switch {
	case list == nil && required:
		c.missing(name)
		return
	case len(list) == 0 && required:
		c.failf("field %q must list at least one entry", name)
		return
	case len(list) > LabelsMax:
		c.failf("field %q lists %d entries; at most %d are kept", name, len(list), LabelsMax)
		return
	}
	for i, w := range list {
		c.label(name+"["+strconv.Itoa(i)+"]", w, true)
	}
}

// label checks a short text the registry keeps (LabelSizeMax): if
// required, present; never empty when given.
func (c *fieldCheck) label(name, v string, required bool) {
	c.sized(name, v, required, LabelSizeMax)
}

// sized checks a text of at most max bytes: if required, present.
func (c *fieldCheck) sized(name, v string, required bool, max int) {
	switch {
	case v == "":
		if required {
			c.missing(name)
		}
	case len(v) > max:
		c.failf("field %q is longer than %d bytes", name, max)
	}
}
