package projections

import (
	"fmt"
	"time"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/protocol"
)

// The key rings' saved state: every agent's keys with the clocks of its
// signed messages (keys.go, Registry.signedOutOfOrder), and the node's own
// key history. A public key is saved in its text form, as it was bound,
// and parsed again on load by the package's own parsing
// (protocol.ParsePublicKey), so that the restored key is the same value;
// its fingerprint is saved too and must match.
//
// The node's history is saved whole, its first key included although that
// one is configuration: a rotation names and retires it (Name, RetiredSeq,
// RetiredAt), and past KeyHistoryMax rotations it is gone. When it is
// still there it must be the configured one: a state saved under another
// node key is refused.

// saveKeys writes the node's key ring, then the agents' by URI.
func (r *Registry) saveKeys(w *statecodec.Writer) error {
	if err := writeKeyring(w, r.nodeKeys); err != nil {
		return fmt.Errorf("registry: the node's keys: %w", err)
	}
	w.Len(len(r.keys))
	for _, uri := range sortedKeys(r.keys) {
		w.String(uri)
		if err := writeKeyring(w, r.keys[uri]); err != nil {
			return fmt.Errorf("registry: the keys of %s: %w", uri, err)
		}
	}
	return nil
}

// loadKeys reads what saveKeys wrote. The maps are put in place under
// keysMu, which the ingest workers read them under (CurrentKey).
func (r *Registry) loadKeys(rd *statecodec.Reader) {
	first := r.nodeKeys.keys[0] // NewRegistry's, from the configuration
	node := readKeyring(rd)
	if rd.Err() != nil {
		return
	}
	for i, k := range node.keys {
		if k.BoundBy == nodeKeyConfigured && (i > 0 || k.KeyID != first.KeyID) {
			rd.Failf("registry: the node's first key in the saved state is %s, and the configuration's is %s: saved under another configuration", k.KeyID, first.KeyID)
			return
		}
	}
	n := rd.Len(3)
	if n > RegistryKeysMax {
		rd.Failf("registry: keys for %d agents, more than its bound of %d", n, RegistryKeysMax)
	}
	keys := make(map[string]*keyring, n)
	prev := ""
	for i := 0; i < n && rd.Err() == nil; i++ {
		uri := rd.String()
		if i > 0 && uri <= prev {
			rd.Failf("registry: the key rings are not in order at %q", uri)
		}
		keys[uri], prev = readKeyring(rd), uri
	}
	if rd.Err() != nil {
		return
	}
	r.keysMu.Lock()
	r.nodeKeys, r.keys = node, keys
	r.keysMu.Unlock()
}

// writeKeyring writes one key ring: its keys, oldest first, and its
// clocks of signed messages, by TYPE (or TYPE and zone), each with what
// was signed at its timestamp. signedOutOfOrder sets both maps together,
// with the same clocks, so they are written as one.
func writeKeyring(w *statecodec.Writer, kr *keyring) error {
	w.Len(len(kr.keys))
	for _, k := range kr.keys {
		writeKeyRecord(w, k)
	}
	if len(kr.lastSigned) != len(kr.sameStamp) || (kr.lastSigned == nil) != (kr.sameStamp == nil) {
		return fmt.Errorf("the clocks of signed messages (%d) and what they covered (%d) are out of step", len(kr.lastSigned), len(kr.sameStamp))
	}
	w.Bool(kr.lastSigned != nil)
	w.Len(len(kr.lastSigned))
	for _, clock := range sortedKeys(kr.lastSigned) {
		same, ok := kr.sameStamp[clock]
		if !ok {
			return fmt.Errorf("the clock of %q has no messages", clock)
		}
		w.String(clock)
		w.Time(kr.lastSigned[clock])
		w.Len(len(same))
		for _, s := range same {
			w.String(s)
		}
	}
	return nil
}

// readKeyring reads what writeKeyring wrote.
func readKeyring(rd *statecodec.Reader) *keyring {
	kr := &keyring{}
	n := rd.Len(keyRecordMinBytes)
	if rd.Err() == nil && (n < 1 || n > KeyHistoryMax) {
		// A ring is made with its first key (bindFirstKey; the node's
		// from the configuration), and Snapshot reads the node's first.
		rd.Failf("registry: a key ring of %d keys, not from 1 to %d", n, KeyHistoryMax)
	}
	for i := 0; i < n && rd.Err() == nil; i++ {
		kr.keys = append(kr.keys, readKeyRecord(rd))
	}
	hasClocks := rd.Bool()
	nc := rd.Len(3)
	if !hasClocks && nc > 0 {
		rd.Failf("registry: %d clocks of signed messages in a ring without them", nc)
	}
	if !hasClocks || rd.Err() != nil {
		return kr
	}
	kr.lastSigned, kr.sameStamp = make(map[string]time.Time, nc), make(map[string][]string, nc)
	prev := ""
	for i := 0; i < nc && rd.Err() == nil; i++ {
		clock, at := rd.String(), rd.Time()
		if i > 0 && clock <= prev {
			rd.Failf("registry: the clocks of signed messages are not in order at %q", clock)
		}
		ns := rd.Len(1)
		if rd.Err() == nil && (ns < 1 || ns > sameStampMax) {
			rd.Failf("registry: %d messages signed at one timestamp, not from 1 to %d", ns, sameStampMax)
		}
		same := make([]string, 0, ns)
		for range ns {
			same = append(same, rd.String())
		}
		kr.lastSigned[clock], kr.sameStamp[clock], prev = at, same, clock
	}
	return kr
}

// keyRecordMinBytes is the fewest bytes writeKeyRecord writes.
const keyRecordMinBytes = 9

// writeKeyRecord writes one key, its public key as the text it was bound
// with, which readKeyRecord parses again.
func writeKeyRecord(w *statecodec.Writer, k *keyRecord) {
	w.String(k.Name)
	w.String(k.KeyID)
	w.String(k.PublicKey)
	w.String(k.BoundBy)
	w.Uint(k.BoundSeq)
	w.Time(k.BoundAt)
	w.Uint(k.RetiredSeq)
	w.Time(k.RetiredAt)
	w.Time(k.VerifiedUntil)
}

// readKeyRecord reads what writeKeyRecord wrote, and parses the public key.
func readKeyRecord(rd *statecodec.Reader) *keyRecord {
	k := &keyRecord{Name: rd.String(), KeyID: rd.String(), PublicKey: rd.String(), BoundBy: rd.String(), BoundSeq: rd.Uint(),
		BoundAt: rd.Time(), RetiredSeq: rd.Uint(), RetiredAt: rd.Time(), VerifiedUntil: rd.Time()}
	if rd.Err() != nil {
		return k
	}
	pub, err := protocol.ParsePublicKey(k.PublicKey)
	switch {
	case err != nil:
		rd.Failf("registry: the key %s: %v", k.KeyID, err)
	case protocol.KeyID(pub) != k.KeyID:
		rd.Failf("registry: the key saved as %s is %s", k.KeyID, protocol.KeyID(pub))
	}
	k.pub = pub
	return k
}
