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
// otherwise. It returns nil once the peer acknowledged the rotation.
func AnnounceKeyRotation(ctx context.Context, p Peer, nodeURI string, old crypto.Signer, body []byte) error {
	fr, err := KeyRotationFrame(nodeURI, p.URI, old, body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, syncDialTimeout)
	defer cancel()
	c, err := p.dial(ctx)
	if err != nil {
		return fmt.Errorf("dialing %s: %w", p.Addr, err)
	}
	defer c.Close()
	defer context.AfterFunc(ctx, func() { c.Close() })()
	c.Conn().SetDeadline(time.Now().Add(syncDialTimeout))
	if err := c.WriteFrame(fr); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	r, err := c.ReadReply()
	if err != nil {
		return fmt.Errorf("reading %s's answer: %w", p.URI, err)
	}
	if from, err := protocol.ParseURI(r.From()); err != nil || from.String() != p.URI || r.Type() != protocol.TypeAck || !strings.HasPrefix(r.Value(protocol.HeaderStatus), "200 ") {
		return fmt.Errorf("%s answered the rotation with %s %q from %s: %s", p.URI, r.Type(), r.Value(protocol.HeaderStatus), r.From(), r.Body)
	}
	return nil
}
