package projections

import (
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/protocol"
)

// Auth is the result of checking one event's signature: the ledger's own
// type, so that a verdict goes to the ledger as it is. Its zero value is
// AuthInvalid, so that a verdict nobody filled in refuses.
type Auth = ledger.Auth

// The results of a signature check (see ledger.Auth).
const (
	AuthInvalid  = ledger.AuthInvalid
	AuthUnsigned = ledger.AuthUnsigned
	AuthValid    = ledger.AuthValid
	AuthNode     = ledger.AuthNode
)

// Verdict is what Authenticate found.
type Verdict struct {
	Auth Auth
	// Reason says why, for a refusal or a log line; it is written for the
	// sender. It is "" for AuthValid and AuthNode.
	Reason string
	// KeyID is the fingerprint (protocol.KeyID) of the key the signature
	// was checked against, or "" if none was.
	KeyID string
	// Stale: the signature verified under KeyID, and only the timestamp
	// lies outside the window. One stamped ahead passes the window later,
	// unchanged (refusedCopies).
	Stale bool
}

// signedTypes are the TYPEs that, once the sender has a key, must be signed
// with it: those that move or reserve credits (a hold is released by the
// end of its task, so task endings count), those the ledger keeps as the
// sender's word (a credit.request counts against the pair's open
// requests, a credit.deny closes one, a credit.received claim puts a
// mismatch on record against its sender), and those that change who the
// sender is or what the registry says of it (an announce refreshes
// last_seen over UDP, where FROM costs nothing to forge; a zone.leave ends a
// membership). zone.join is not here: its one signature member carries the
// zone's HMAC, which the zone checks. task.assign needs a signature only
// when it carries CREDITS, and credit.balance only when it claims figures
// (MessageNeedsSignature): an empty one is a query.
//
// Until 2026-12-01 requests, denials and claims were not here: anyone
// could send a hundred unsigned requests in a keyed agent's name and lock
// out its own, close requests made to it, or record false claims in its
// name (helper-60).
var signedTypes = map[string]bool{
	protocol.TypeCreditTransfer: true,
	protocol.TypeCreditReward:   true,
	protocol.TypeCreditAdjust:   true,
	protocol.TypeCreditApprove:  true,
	protocol.TypeCreditRequest:  true,
	protocol.TypeCreditDeny:     true,
	protocol.TypeCreditReceived: true,
	protocol.TypeTaskResult:     true,
	protocol.TypeTaskReject:     true,
	protocol.TypeTaskCancel:     true,
	protocol.TypeRegistryUpdate: true,
	protocol.TypeRegistrySync:   true,
	protocol.TypeAgentAnnounce:  true,
	protocol.TypeAuthRequest:    true,
	protocol.TypeKeyRotate:      true,
	protocol.TypeMentorRegister: true,
	protocol.TypeMentorReport:   true,
	protocol.TypeZoneLeave:      true,
}

// NeedsSignature reports whether a message of TYPE typ must be signed once
// its sender has a key. task.assign and credit.balance report false: they
// need a signature only with CREDITS, or with figures claimed, which
// MessageNeedsSignature sees.
func NeedsSignature(typ string) bool { return signedTypes[typ] }

// MessageNeedsSignature is NeedsSignature for a whole message: it adds
// task.assign with CREDITS, which reserves the sender's credits, and a
// credit.balance that claims figures, which the ledger records against
// its sender.
func MessageNeedsSignature(m *protocol.Message) bool {
	if signedTypes[m.Info.Name] {
		return true
	}
	switch m.Info.Name {
	case protocol.TypeTaskAssign:
		return m.Credits != nil
	case protocol.TypeCreditBalance:
		b, ok := m.Payload.(*protocol.CreditBalance)
		return ok && b.Claims()
	}
	return false
}

// Authenticate checks e's signature against FROM's key as it stood before e:
// the key bound by the latest event with a lower sequence (for an event not
// yet stored, Seq 0, the current key). The runner applies the registry
// first, so when another projection calls Authenticate during its own Apply
// of e, a key.rotate or auth.request in e itself has already been folded;
// the verdict still names the key e had to be signed with, because the
// registry took it before changing anything. A verdict is a function of the
// message and the key history alone, so it is the same on every replay.
//
// Call it from Apply or under Runner.View.
func (r *Registry) Authenticate(e *Event) Verdict {
	if e.ID != "" && e.ID == r.last.id {
		return r.last.v
	}
	return r.authenticate(e)
}

func (r *Registry) authenticate(e *Event) Verdict {
	if e.Msg == nil {
		return Verdict{Auth: AuthInvalid, Reason: "the message does not decode"}
	}
	if e.Type == protocol.TypeZoneJoin {
		return Verdict{Auth: AuthUnsigned, Reason: "zone.join is signed with the zone's secret, which the zone checks"}
	}
	if v, ok := r.verifiedAtIngest(e); ok {
		return v
	}
	sig, signed, err := signatureOf(e.Msg, e.Body)
	if err != nil {
		return Verdict{Auth: AuthInvalid, Reason: sigReason(err)}
	}
	pub, keyID, haveKey := r.keyFor(e.From, e.Seq)
	if !signed {
		if haveKey && MessageNeedsSignature(e.Msg) {
			return Verdict{Auth: AuthInvalid, KeyID: keyID, Reason: fmt.Sprintf(
				"%s has a key (%s), so a %s from it must be signed with that key", e.From, keyID, e.Type)}
		}
		return Verdict{Auth: AuthUnsigned}
	}
	// A signature that cannot be read is refused even when there is no key
	// to check it with: the sender meant to sign, and what it sent (often
	// the reference's shortened placeholder) is not a signature.
	if _, _, err := protocol.ParseSignature(sig); err != nil {
		return Verdict{Auth: AuthInvalid, Reason: sigReason(err)}
	}
	if !haveKey {
		return Verdict{Auth: AuthUnsigned, Reason: fmt.Sprintf("no key is bound to %s; the signature was not checked", e.From)}
	}
	if err := r.verifyCached(pub, keyID, e); err != nil {
		return Verdict{Auth: AuthInvalid, KeyID: keyID, Reason: sigReason(err)}
	}
	return r.freshVerdict(e, keyID)
}

// freshVerdict is the verdict on e, whose signature verified under keyID:
// AuthValid (AuthNode for the node), unless its timestamp is outside the
// window or before its sender's first key was bound.
func (r *Registry) freshVerdict(e *Event, keyID string) Verdict {
	ts, reason := r.staleness(e)
	if reason != "" {
		return Verdict{Auth: AuthInvalid, KeyID: keyID, Reason: reason, Stale: true}
	}
	if e.From == r.node {
		return Verdict{Auth: AuthNode, KeyID: keyID}
	}
	if reason := r.signedBeforeBinding(e, ts); reason != "" {
		return Verdict{Auth: AuthInvalid, KeyID: keyID, Reason: reason}
	}
	return Verdict{Auth: AuthValid, KeyID: keyID}
}

// signedBeforeBinding says why e, signed with its sender's first key and
// stamped ts (staleness read it), is stamped before the auth.request that bound that key, or "". Until the
// binding a message in the sender's name is judged unsigned, its
// signature unchecked: it is named by its ID header (the ledger) and sets
// no clock (signedOutOfOrder). Once the key is bound the same bytes
// verify, so a copy sent again within its window was taken as a new
// signed message: a payee paid twice by a reward the payer signed before
// binding its key, an update that put back an address the agent had
// since left (review, helper-131).
func (r *Registry) signedBeforeBinding(e *Event, ts time.Time) string {
	kr := r.keys[e.From]
	if !kr.boundBefore(ts) {
		return ""
	}
	return fmt.Sprintf("this signed %s is stamped %s, before %s bound its key (%s): a copy of a message from before the binding; sign it again",
		e.Type, rfc3339(ts), e.From, rfc3339(kr.lastSigned[firstBindingClock]))
}

// verifiedAtIngest is authenticate's common case, decided without reading
// the body again: the ingest workers verified e's signature, with the key
// the fold uses now. That check read the whole body canonically and found
// a signature that verifies, so every step of authenticate before the
// timestamp has passed already, and its outcome is the same.
func (r *Registry) verifiedAtIngest(e *Event) (Verdict, bool) {
	c := r.cfg.Verdicts
	if c == nil {
		return Verdict{}, false
	}
	_, keyID, haveKey := r.keyFor(e.From, e.Seq)
	if !haveKey {
		return Verdict{}, false
	}
	if err, found := c.Get(e.Envelope, keyID); !found || err != nil {
		return Verdict{}, false
	}
	return r.freshVerdict(e, keyID), true
}

// signatureOf is protocol.SignatureOf for a message Parse has read: one
// without a top-level signature member (Parse found none, escaped names
// included) is unsigned, and its body is not read again.
func signatureOf(msg *protocol.Message, body []byte) (string, bool, error) {
	if !msg.HasSignatureMember() {
		// Unsigned, even if the body cannot be read for signing (a lone
		// surrogate escape, invalid UTF-8): that used to count as a bad
		// signature whenever the body held the word "signature" or any
		// \u escape, and such a message was refused (401) by the fold
		// after the edge had answered 202 (helper-66).
		return "", false, nil
	}
	return protocol.SignatureOf(body)
}

// HasKey reports whether uri had a key bound as of the event at seq (the
// key its messages at seq are checked with).
func (r *Registry) HasKey(uri string, seq uint64) bool {
	_, _, ok := r.keyFor(uri, seq)
	return ok
}

// keyFor returns the key FROM had before the event at seq: the node's own
// for the node's URI, else the latest bound at a lower sequence.
func (r *Registry) keyFor(uri string, seq uint64) (crypto.PublicKey, string, bool) {
	k := r.keyringOf(uri).at(seq)
	if k == nil {
		return nil, "", false
	}
	return k.pub, k.KeyID, true
}

// verifyCached verifies e's signature under pub, or takes the ingest's
// outcome when it was reached with the same key: success, or the failure
// with its reason, which is what VerifyEnvelope would return again.
func (r *Registry) verifyCached(pub crypto.PublicKey, keyID string, e *Event) error {
	if c := r.cfg.Verdicts; c != nil {
		if err, found := c.Get(e.Envelope, keyID); found {
			return err
		}
	}
	return VerifyEnvelope(pub, e.Envelope)
}

// carriedKey is protocol.ParsePublicKey of the key an auth.request
// carries, or the ingest's parse of it when there was one.
func (r *Registry) carriedKey(e *Event, text string) (crypto.PublicKey, string, error) {
	if c := r.cfg.Verdicts; c != nil {
		if k, found := c.Carried(e.Envelope); found {
			return k.Pub, k.KeyID, k.Err
		}
	}
	k := ParseCarriedKey(text)
	return k.Pub, k.KeyID, k.Err
}

// ParseCarriedKey reads the public key an auth.request carries, the one
// way both the fold and the ingest workers read it.
func ParseCarriedKey(text string) *CarriedKey {
	pub, err := protocol.ParsePublicKey(text)
	if err != nil {
		return &CarriedKey{Err: err}
	}
	return &CarriedKey{Pub: pub, KeyID: protocol.KeyID(pub)}
}

// VerifyEnvelope checks the signature e carries against pub, over FROM, TO,
// TYPE and CREDITS as the frame's headers spell them, trimmed of white
// space as the decoder keeps them (docs/PROTOCOL.md, "Headers"). It is the one check
// both the fold and the bridge's ingest workers run, so that a verdict the
// bridge puts in a VerdictCache is the verdict the fold would reach.
func VerifyEnvelope(pub crypto.PublicKey, e *events.Envelope) error {
	c := envelopeCheck(pub, e)
	return protocol.Verify(c.Key, c.From, c.To, c.Type, c.Credits, c.Body)
}

// envelopeCheck is the signature check of e under pub.
func envelopeCheck(pub crypto.PublicKey, e *events.Envelope) protocol.SigCheck {
	return protocol.SigCheck{Key: pub, From: e.Header(protocol.HeaderFrom), To: e.Header(protocol.HeaderTo),
		Type: e.Header(protocol.HeaderType), Credits: e.Header(protocol.HeaderCredits), Body: e.Body}
}

// staleness says why a signed message's timestamp is unacceptable, or "".
// Every signed message must carry a top-level "timestamp" (as an extra
// member where its TYPE defines none, e.g. registry.update): without one a
// captured message could be replayed forever.
func (r *Registry) staleness(e *Event) (time.Time, string) {
	raw, ok := timestampRaw(e)
	if !ok {
		return time.Time{}, "stale: a signed message must carry a \"timestamp\" within " + r.window.String() + " of its arrival, and this one carries none"
	}
	var ts protocol.Timestamp
	if err := ts.UnmarshalJSON(raw); err != nil || ts.IsZero() { // raw is one JSON value: no need for json.Unmarshal's check
		return time.Time{}, "stale: the \"timestamp\" of a signed message must be an RFC 3339 time"
	}
	return ts.Time, r.outsideWindow(ts.Time, e.ReceivedAt)
}

// timestampRaw is the body's top-level "timestamp" member, if it has one.
func timestampRaw(e *Event) ([]byte, bool) {
	if e.Msg != nil { // the value Parse found: no second pass over the body
		raw := e.Msg.TimestampRaw()
		return raw, raw != nil && string(raw) != "null"
	}
	return bodyMember(e.Body, "timestamp")
}

// signedTimestamp is the time a signed message carries, when it carries
// one that reads (staleness has refused the others).
func signedTimestamp(e *Event) (time.Time, bool) {
	raw, ok := timestampRaw(e)
	if !ok {
		return time.Time{}, false
	}
	var ts protocol.Timestamp
	if err := ts.UnmarshalJSON(raw); err != nil || ts.IsZero() {
		return time.Time{}, false
	}
	return ts.Time, true
}

// outsideWindow says why ts is too far from arrival, or "".
func (r *Registry) outsideWindow(ts, arrival time.Time) string {
	d := arrival.Sub(ts)
	switch {
	case d > r.window:
		return fmt.Sprintf("stale: the message's timestamp %s is %v older than its arrival; the window is %v",
			rfc3339(ts), d.Round(time.Second), r.window)
	case d < -r.window:
		return fmt.Sprintf("stale: the message's timestamp %s is %v ahead of its arrival; the window is %v",
			rfc3339(ts), (-d).Round(time.Second), r.window)
	}
	return ""
}

// bodyMember returns the value of a top-level member of a JSON object. The
// body has passed protocol.Parse, which refuses duplicate members, so the
// member is unambiguous.
func bodyMember(body []byte, name string) (json.RawMessage, bool) {
	v, ok := protocol.TopMember(body, name)
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

// sigReason is the sentence in a protocol error, for a verdict's Reason.
func sigReason(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}
