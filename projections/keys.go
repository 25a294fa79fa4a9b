package projections

import (
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aglx/ledger/protocol"
)

// Keys: which public key speaks for which URI. The first key an agent binds
// (auth.request) is trusted on first use; after that only key.rotate, signed
// with the current key, replaces it. Replaced keys stay in the agent's
// history, with the sequence from which they stopped counting, so that old
// events can still be checked against the key they were signed with.

// AuthValidity is how long an auth.response vouches for a binding: its
// "expires". The binding itself lasts until a key.rotate; expires only
// bounds how long a third party should trust the node's signed statement
// without asking again (a renewal is another auth.request with the same
// key). Thirty days matches the reference's example.
const AuthValidity = 30 * 24 * time.Hour

// TrustVerified is the trust_level of a binding the node verified by proof
// of possession.
const TrustVerified = "verified"

// The status of an auth.response.
const (
	AuthStatusVerified = "VERIFIED"
	AuthStatusRejected = "REJECTED"
)

// KeyHistoryMax bounds the keys kept per agent. Past it the oldest is
// forgotten: events older than its successor can then no longer be checked,
// which only matters to someone re-checking an ancient event.
const KeyHistoryMax = 32 // keys

// seenOutcomesMax bounds the answered auth.request and key.rotate messages
// remembered for replays. They are also dropped once older than twice the
// signature window, since a replay after that is refused as stale anyway.
const seenOutcomesMax = 1 << 16 // messages

// keyRecord is one key an agent has had.
type keyRecord struct {
	// Name is the agent's own id for the key: new_key_id of the key.rotate
	// that bound it, or the old_key_id a later rotation called it by. A key
	// bound by auth.request has none until then.
	Name          string    `json:"name,omitempty"`
	KeyID         string    `json:"key_id"` // protocol.KeyID: the fingerprint
	PublicKey     string    `json:"public_key"`
	BoundBy       string    `json:"bound_by"` // auth.request or key.rotate
	BoundSeq      uint64    `json:"bound_seq"`
	BoundAt       time.Time `json:"bound_at"`
	RetiredSeq    uint64    `json:"retired_seq,omitempty"`
	RetiredAt     time.Time `json:"retired_at,omitzero"`
	VerifiedUntil time.Time `json:"verified_until,omitzero"`

	pub crypto.PublicKey
}

// keyring is an agent's keys, oldest first; the last is current.
type keyring struct {
	keys []*keyRecord
	// lastSigned is, by TYPE, the timestamp of the latest signed message
	// that changed the registry (Registry.signedOutOfOrder). It is folded
	// from the log like everything else, so a replay rebuilds it.
	lastSigned map[string]time.Time
	// sameStamp holds, by the same clock, what the signed messages
	// stamped lastSigned covered (their replayKey): equal timestamps pass
	// the order check, so these tell a replay from a second message of
	// the same second. At most sameStampMax each.
	sameStamp map[string][]string
}

// firstBindingClock is the clock (keyring.lastSigned) that holds the
// signed timestamp of the auth.request that bound an agent's first key,
// with that request's replayKey: a signed message stamped before it was
// signed before the key spoke for its sender, and is refused
// (Registry.signedBeforeBinding). It is kept with the clocks of signed
// messages so that a saved state holds it; no TYPE's clock has this
// name.
const firstBindingClock = "auth.request first key"

// boundBefore reports whether ts is before the signed timestamp of the
// auth.request that bound the ring's first key.
func (kr *keyring) boundBefore(ts time.Time) bool {
	if kr == nil {
		return false
	}
	bound, ok := kr.lastSigned[firstBindingClock]
	return ok && ts.Before(bound)
}

// noteFirstBinding records the signed timestamp of the auth.request e
// that bound the ring's first key (firstBindingClock).
func (kr *keyring) noteFirstBinding(e *Event, stamp time.Time) {
	if kr.lastSigned == nil {
		kr.lastSigned, kr.sameStamp = map[string]time.Time{}, map[string][]string{}
	}
	kr.lastSigned[firstBindingClock], kr.sameStamp[firstBindingClock] = stamp.UTC(), []string{replayKey(e)}
}

// sameStampMax bounds the signed messages of one TYPE from one sender
// remembered for one timestamp: agents stamp whole seconds and send a few
// a second at most; past the bound the oldest is forgotten.
const sameStampMax = 64 // messages

// at returns the key that counted for an event at seq: the latest bound
// by an earlier event. seq 0 stands for an event not yet stored.
func (kr *keyring) at(seq uint64) *keyRecord {
	if kr == nil {
		return nil
	}
	for i := len(kr.keys) - 1; i >= 0; i-- {
		if seq == 0 || kr.keys[i].BoundSeq < seq {
			return kr.keys[i]
		}
	}
	return nil
}

func (kr *keyring) current() *keyRecord { return kr.at(0) }

// nodeKeyConfigured is the bound_by of the node's first key, which comes
// from its configuration (RegistryConfig.NodeFirstKey), not from an event.
const nodeKeyConfigured = "configuration"

// keyringOf is uri's keys: the node's own history for the node's URI,
// else the agent's (nil if it has none).
func (r *Registry) keyringOf(uri string) *keyring {
	if uri == r.node {
		return r.nodeKeys
	}
	return r.keys[uri]
}

// has reports whether the agent has had a key with this fingerprint or
// this name.
func (kr *keyring) has(keyID, name string) bool {
	for _, k := range kr.keys {
		if k.KeyID == keyID || (name != "" && k.Name == name) {
			return true
		}
	}
	return false
}

func (kr *keyring) add(k *keyRecord) {
	kr.keys = append(kr.keys, k)
	if len(kr.keys) > KeyHistoryMax {
		kr.keys = append(kr.keys[:0:0], kr.keys[len(kr.keys)-KeyHistoryMax:]...)
	}
}

// CurrentKey returns the key that now speaks for uri, its fingerprint
// (protocol.KeyID), and whether there is one; for the node's URI, the node's
// key. The bridge's ingest workers use it to fill the VerdictCache. It is
// safe on any goroutine, without Runner.View: a key it returns may be
// replaced a moment later, which is harmless, because the fold takes a
// verdict only if it was made with the key the fold itself uses.
func (r *Registry) CurrentKey(uri string) (crypto.PublicKey, string, bool) {
	r.keysMu.RLock()
	defer r.keysMu.RUnlock()
	return r.keyFor(uri, 0)
}

// seenOutcome is the first answer to a message that must take effect once:
// an auth.request or key.rotate that succeeded, any authentic zone.join.
// A replay of the same message is answered from it and changes nothing.
type seenOutcome struct {
	Type   string    `json:"type"`
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
	Status int       `json:"status"`
	reply  Reply
}

// replayKey names a message by what its signature covers: the signing
// input (FROM, TO and TYPE as written, and the body in canonical form,
// without the signature). Named by its exact bytes, a captured zone.join
// sent again with one more space, or its members in another order, still
// verified and was not recognised, and got a fresh session token for the
// agent that had joined. A body the signing input cannot be made of is
// named by its bytes; it carries no signature that could verify.
func replayKey(e *Event) string {
	h := sha256.New()
	from, to, typ := e.Header(protocol.HeaderFrom), e.Header(protocol.HeaderTo), e.Header(protocol.HeaderType)
	if input, err := protocol.SigningInput(from, to, typ, e.Header(protocol.HeaderCredits), e.Body); err == nil {
		h.Write(input)
	} else {
		for _, s := range []string{from, to, typ} {
			h.Write([]byte(s))
			h.Write([]byte{'\n'})
		}
		h.Write(e.Body)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// remember records the answer to e in seen and forgets answers too old to
// matter.
func (r *Registry) remember(seen *recentMap[seenOutcome], key string, e *Event, rep Reply) {
	horizon := r.now.Add(-2 * r.window)
	seen.dropWhile(func(o seenOutcome) bool { return o.At.Before(horizon) })
	seen.put(key, seenOutcome{Type: e.Type, Seq: e.Seq, At: r.now, Status: int(rep.Status), reply: rep})
}

// answerReplay answers e with the first answer to the same message, if
// there was one.
func (r *Registry) answerReplay(key string, e *Event) bool {
	first, ok := r.seen.get(key)
	if ok {
		r.put(e, first.reply)
	}
	return ok
}

// authResponseBody is the body of auth.response.
type authResponseBody struct {
	// EventID and Seq name the request's event. A signed answer carries
	// them itself, signed with the rest: the bridge adds them to unsigned
	// answers only, since adding a member would break a signature.
	EventID    string `json:"event_id,omitempty"`
	Seq        uint64 `json:"seq,omitempty"`
	Status     string `json:"status"`
	TrustLevel string `json:"trust_level,omitempty"`
	Expires    string `json:"expires,omitempty"`
	KeyID      string `json:"key_id,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// authRequest binds FROM's first key, or renews the binding of its current
// one. The checks, in order: the signature must be readable (401: the
// reference's shortened placeholders fail here); the key must parse (400);
// the request's signature must verify with that key, proving possession
// (401); its timestamp must be within the window (401); and FROM must have
// no other key (401: "use key.rotate"). A request that succeeds is
// remembered, and a byte-identical resend gets the same answer without
// being applied again. Refusals are not remembered: they change nothing,
// and a resend is judged again.
func (r *Registry) authRequest(e *Event, p *protocol.AuthRequest) {
	if e.From == r.node {
		r.authReject(e, protocol.StatusForbidden, "the node's own URI speaks with the node's key; it binds no other")
		return
	}
	key := replayKey(e)
	if r.answerReplay(key, e) {
		return
	}
	if _, _, err := protocol.ParseSignature(p.Signature); err != nil {
		r.authReject(e, protocol.StatusUnauthorized, sigReason(err))
		return
	}
	pub, keyID, err := r.carriedKey(e, p.PublicKey)
	if err != nil {
		r.authReject(e, protocol.StatusBadRequest, sigReason(err))
		return
	}
	if err := r.verifyCached(pub, keyID, e); err != nil {
		r.authReject(e, protocol.StatusUnauthorized, "the request does not prove possession of the key: "+sigReason(err))
		return
	}
	rep := r.bindFirstKey(e, p, pub, keyID)
	r.put(e, rep)
	if rep.Status == protocol.StatusOK {
		r.remember(r.seen, key, e, rep)
	}
}

// bindFirstKey decides an authentic auth.request and returns its answer.
func (r *Registry) bindFirstKey(e *Event, p *protocol.AuthRequest, pub crypto.PublicKey, keyID string) Reply {
	if reason := r.outsideWindow(p.Timestamp.Time, e.ReceivedAt); reason != "" {
		return r.authRejection(protocol.StatusUnauthorized, reason)
	}
	kr := r.keys[e.From]
	cur := kr.current()
	if cur != nil && cur.KeyID != keyID {
		return r.authRejection(protocol.StatusUnauthorized, fmt.Sprintf(
			"%s already has a key bound (%s); a new key replaces it only through key.rotate signed with the current one", e.From, cur.KeyID))
	}
	until := r.now.Add(AuthValidity)
	if cur == nil && kr == nil && len(r.keys) >= RegistryKeysMax {
		return r.authRejection(protocol.StatusUnavailable, fmt.Sprintf("the registry holds keys for %d agents, its limit", RegistryKeysMax))
	}
	if cur == nil {
		r.keysMu.Lock()
		if kr == nil {
			kr = &keyring{}
			r.keys[e.From] = kr
		}
		cur = &keyRecord{KeyID: keyID, PublicKey: p.PublicKey, BoundBy: e.Type, BoundSeq: e.Seq, BoundAt: r.now, pub: pub}
		kr.add(cur)
		r.keysMu.Unlock()
		kr.noteFirstBinding(e, p.Timestamp.Time)
	}
	cur.VerifiedUntil = until
	return r.signedAuthResponse(e, authResponseBody{
		Status: AuthStatusVerified, TrustLevel: TrustVerified, Expires: rfc3339(until), KeyID: keyID})
}

// signedAuthResponse is an auth.response to be signed with the node's key
// when it is taken (Reply.sign), over the FROM and TO the bridge writes on
// the reply: the node's URI, and the request's FROM as the request spelt
// it.
func (r *Registry) signedAuthResponse(e *Event, body authResponseBody) Reply {
	body.EventID, body.Seq = e.ID, e.Seq
	b, err := json.Marshal(body)
	if err != nil {
		return ErrorReply(protocol.StatusUnavailable, "the node could not write its answer: "+err.Error())
	}
	return Reply{Type: protocol.TypeAuthResponse, Status: protocol.StatusOK, Body: b,
		sign: r.authResponseSignature(e.Header(protocol.HeaderFrom))}
}

// authResponseSignature is the signature of an auth.response from the
// node to to, made when the reply is taken (lazySignature). The node's key
// and URI are configuration, so to is all a saved state needs to record
// for a load to make it again (registry_state_keys.go). Nil for a fold
// that answers no one (RegistryConfig.NodePublicKey): it has no key.
func (r *Registry) authResponseSignature(to string) *lazySignature {
	key := r.cfg.NodeKey
	if key == nil {
		return nil
	}
	node := r.node
	return &lazySignature{to: to, fn: func(b []byte) ([]byte, error) {
		sig, err := protocol.Sign(key, node, to, protocol.TypeAuthResponse, "", b)
		if err != nil {
			return nil, err
		}
		return protocol.SetSignature(b, sig)
	}}
}

func (r *Registry) authRejection(status protocol.Status, reason string) Reply {
	b, _ := json.Marshal(authResponseBody{Status: AuthStatusRejected, Reason: reason})
	return Reply{Type: protocol.TypeAuthResponse, Status: status, Body: b}
}

func (r *Registry) authReject(e *Event, status protocol.Status, reason string) {
	r.put(e, r.authRejection(status, reason))
}

// keyRotate replaces FROM's current key. The message must be signed with
// that key and be fresh (the verdict taken before this event). A rotation
// that succeeds is remembered, so that a resend is answered with the first
// outcome rather than checked against the key it installed; refusals
// change nothing and are judged again.
func (r *Registry) keyRotate(e *Event, p *protocol.KeyRotate) {
	key := replayKey(e)
	if r.answerReplay(key, e) {
		return
	}
	cur := r.keyringOf(e.From).current()
	if cur == nil {
		r.refuse(e, protocol.StatusUnauthorized, fmt.Sprintf(
			"no key is bound to %s, so key.rotate cannot be checked; bind a first key with auth.request", e.From))
		return
	}
	// The node's own rotation is AuthNode: it is made by aglxd
	// --rotate-node-key, never taken from the wire (the bridge refuses
	// every non-credit frame in the node's name).
	if v := r.last.v; v.Auth != AuthValid && (v.Auth != AuthNode || e.From != r.node) {
		r.refuse(e, protocol.StatusUnauthorized, "key.rotate must be signed with the current key: "+v.Reason)
		return
	}
	rep := r.rotate(e, p, cur)
	r.put(e, rep)
	if rep.Status == protocol.StatusOK {
		r.remember(r.seen, key, e, rep)
	}
}

// rotate decides an authentic key.rotate and returns its answer.
func (r *Registry) rotate(e *Event, p *protocol.KeyRotate, cur *keyRecord) Reply {
	fail := func(status protocol.Status, reason string) Reply {
		b, _ := json.Marshal(errorBody{int(status), reason})
		return Reply{Type: protocol.TypeError, Status: status, Body: b}
	}
	if cur.Name != "" && p.OldKeyID != cur.Name && p.OldKeyID != cur.KeyID {
		return fail(protocol.StatusConflict, fmt.Sprintf("old_key_id %q does not name the current key of %s (%s, %s)", p.OldKeyID, e.From, cur.Name, cur.KeyID))
	}
	pub, err := protocol.ParsePublicKey(p.PublicKey)
	if err != nil {
		return fail(protocol.StatusBadRequest, sigReason(err))
	}
	kr := r.keyringOf(e.From)
	keyID := protocol.KeyID(pub)
	if kr.has(keyID, "") {
		return fail(protocol.StatusConflict, fmt.Sprintf("the key %s was bound to %s before; a rotation needs a new key", keyID, e.From))
	}
	if kr.has("", p.NewKeyID) {
		return fail(protocol.StatusConflict, fmt.Sprintf("new_key_id %q already names a key of %s", p.NewKeyID, e.From))
	}
	if cur.Name == "" {
		cur.Name = p.OldKeyID
	}
	cur.RetiredSeq, cur.RetiredAt = e.Seq, r.now
	r.keysMu.Lock()
	kr.add(&keyRecord{Name: p.NewKeyID, KeyID: keyID, PublicKey: p.PublicKey, BoundBy: e.Type, BoundSeq: e.Seq, BoundAt: r.now, pub: pub})
	r.keysMu.Unlock()
	b, _ := json.Marshal(ackBody{EventID: e.ID, Seq: e.Seq, KeyID: p.NewKeyID})
	return Reply{Type: protocol.TypeAck, Status: protocol.StatusOK, Body: b}
}

// KeyView is one key of an agent, as queries show it.
type KeyView struct {
	Name      string `json:"name,omitempty"`
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
	Current   bool   `json:"current"`
	BoundBy   string `json:"bound_by"`
	// BoundAt is left out for the node's first key, which its
	// configuration bound, not an event.
	BoundAt       time.Time `json:"bound_at,omitzero"`
	RetiredAt     time.Time `json:"retired_at,omitzero"`
	VerifiedUntil time.Time `json:"verified_until,omitzero"`
}

// keyViews lists uri's keys, oldest first.
func (r *Registry) keyViews(uri string) []KeyView {
	kr := r.keyringOf(uri)
	if kr == nil {
		return nil
	}
	out := make([]KeyView, len(kr.keys))
	for i, k := range kr.keys {
		out[i] = KeyView{Name: k.Name, KeyID: k.KeyID, PublicKey: k.PublicKey, Current: i == len(kr.keys)-1,
			BoundBy: k.BoundBy, BoundAt: k.BoundAt, RetiredAt: k.RetiredAt, VerifiedUntil: k.VerifiedUntil}
	}
	return out
}
