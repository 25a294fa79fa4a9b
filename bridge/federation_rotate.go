package bridge

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aglx/ledger/protocol"
	"github.com/oklog/ulid/v2"
)

// KeyRotationBody is the body of a node's key.rotate from old to next,
// stamped at: the one aglxd --rotate-node-key records in the node's own
// log and sends each peer that takes its registry.sync.
func KeyRotationBody(old, next crypto.PublicKey, at time.Time) ([]byte, error) {
	pub, err := protocol.MarshalPublicKey(next)
	if err != nil {
		return nil, err
	}
	return json.Marshal(protocol.KeyRotate{
		OldKeyID: protocol.KeyID(old), NewKeyID: protocol.KeyID(next), PublicKey: pub,
		RotationReason: "aglxd --rotate-node-key", Timestamp: protocol.Timestamp{Time: at.UTC()},
	})
}

// KeyRotationFrame is the node's key.rotate with body, from nodeURI to
// `to`, signed with old (whose key the body names as the old one).
func KeyRotationFrame(nodeURI, to string, old crypto.Signer, body []byte) (*protocol.Frame, error) {
	fr := &protocol.Frame{Transport: protocol.TransportTCP, Body: append([]byte(nil), body...), Headers: []protocol.Header{
		{Name: protocol.HeaderFrom, Value: nodeURI},
		{Name: protocol.HeaderTo, Value: to},
		{Name: protocol.HeaderType, Value: protocol.TypeKeyRotate},
		{Name: protocol.HeaderID, Value: ulid.Make().String()},
		{Name: protocol.HeaderContentType, Value: "application/json"},
	}}
	return fr, protocol.SignFrame(old, fr)
}

// AnnounceKeyRotation tells a peer registry that this node's key changed:
// a key.rotate in nodeURI's name, signed with the old key, over the
// connection the peer's trust names (TLS, or plain TCP, where a peer
// refuses security messages unless it allows them). The peer bound the old
// key when this node's operator sent it an auth.request, and checks every
// registry.sync against the key it has; without this, every push after a
// rotation is refused (401), and only the old key could tell the peer
// otherwise. It returns once the peer acknowledged the rotation, or,
// when it refused it as not signed with the key it has, once an
// auth.request signed with next shows that the peer has next already
// (had: a rotation run again after an earlier run told the peer).
func AnnounceKeyRotation(ctx context.Context, p Peer, nodeURI string, old, next crypto.Signer, body []byte) (had bool, err error) {
	fr, err := KeyRotationFrame(nodeURI, p.URI, old, body)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, syncDialTimeout)
	defer cancel()
	c, err := p.dial(ctx)
	if err != nil {
		return false, fmt.Errorf("dialing %s: %w", p.Addr, err)
	}
	defer c.Close()
	defer context.AfterFunc(ctx, func() { c.Close() })()
	c.Conn().SetDeadline(time.Now().Add(syncDialTimeout))
	r, err := exchange(c, fr)
	if err != nil {
		return false, fmt.Errorf("sending %s the rotation: %w", p.URI, err)
	}
	if answeredBy(r, p.URI, protocol.TypeAck) {
		return false, nil
	}
	refusal := fmt.Errorf("%s answered the rotation with %s %q from %s: %s", p.URI, r.Type(), r.Value(protocol.HeaderStatus), r.From(), r.Body)
	if !strings.HasPrefix(r.Value(protocol.HeaderStatus), "401 ") {
		return false, refusal
	}
	// Refused as not signed with the key the peer has: the old key is
	// not it. If next is, an auth.request with next renews its binding
	// (VERIFIED) and changes nothing else; if the peer has yet another
	// key, it refuses the request too.
	pub, err := protocol.MarshalPublicKey(next.Public())
	if err != nil {
		return false, err
	}
	ask := &protocol.Frame{Transport: protocol.TransportTCP, Headers: []protocol.Header{
		{Name: protocol.HeaderFrom, Value: nodeURI},
		{Name: protocol.HeaderTo, Value: p.URI},
		{Name: protocol.HeaderType, Value: protocol.TypeAuthRequest},
		{Name: protocol.HeaderID, Value: ulid.Make().String()},
		{Name: protocol.HeaderContentType, Value: "application/json"},
	}}
	if ask.Body, err = json.Marshal(protocol.AuthRequest{AgentID: "registry-key-check", PublicKey: pub, Timestamp: protocol.Timestamp{Time: time.Now().UTC()}}); err != nil {
		return false, err
	}
	if err := protocol.SignFrame(next, ask); err != nil {
		return false, err
	}
	r, err = exchange(c, ask)
	if err != nil || !answeredBy(r, p.URI, protocol.TypeAuthResponse) {
		return false, refusal
	}
	var v struct {
		Status string `json:"status"`
		KeyID  string `json:"key_id"`
	}
	if json.Unmarshal(r.Body, &v) != nil || v.Status != "VERIFIED" || v.KeyID != protocol.KeyID(next.Public()) {
		return false, refusal
	}
	return true, nil
}

// exchange writes f on c and reads the reply.
func exchange(c *Client, f *protocol.Frame) (*protocol.Frame, error) {
	if err := c.WriteFrame(f); err != nil {
		return nil, err
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	return c.ReadReply()
}

// answeredBy reports whether r is a 200 of TYPE typ from peer.
func answeredBy(r *protocol.Frame, peer, typ string) bool {
	from, err := protocol.ParseURI(r.From())
	return err == nil && from.String() == peer && r.Type() == typ && strings.HasPrefix(r.Value(protocol.HeaderStatus), "200 ")
}
