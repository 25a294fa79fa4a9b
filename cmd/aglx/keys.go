package main

import (
	"bytes"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/aglx/ledger/protocol"
)

// runKeygen makes an agent key pair: the private key as PKCS #8 PEM in a
// file only its owner may read, the public key (the form auth.request and
// key.rotate carry) and its key id on stdout.
func runKeygen(args []string, stdout io.Writer) error {
	fs := newFlagSet("keygen")
	out := fs.String("out", "agent.key", "where to write the private key (PEM, mode 0600)")
	alg := fs.String("type", protocol.KeyEd25519, "ed25519 or rsa (RSA-2048)")
	if stop, err := parseFlags(fs, args); stop {
		return err
	}
	if fs.NArg() > 0 {
		// "aglx keygen bob.key" wrote agent.key and said nothing of the
		// name it was given (helper-81).
		return fmt.Errorf("aglx keygen takes no argument, got %q: the key's file is --out %s", fs.Arg(0), fs.Arg(0))
	}
	k, err := protocol.GenerateKey(*alg)
	if err != nil {
		return err
	}
	b, err := protocol.MarshalPrivateKey(k)
	if err != nil {
		return err
	}
	// O_EXCL: an existing key is never overwritten, not even one made
	// between a check and the write.
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists; not overwriting a key", *out)
	}
	if err != nil {
		return err
	}
	// Synced before the public key is shown: an agent may bind it at once,
	// and a key lost to a power cut after that could never sign again. A
	// key that could not be written whole is removed, or the next try
	// would refuse to overwrite it.
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out)
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	pub, err := protocol.MarshalPublicKey(k.Public())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "private key: %s\npublic key:  %s\nkey id:      %s\n", *out, pub, protocol.KeyID(k.Public()))
	return nil
}

// loadNodeKey is loadKey for the node's own key, with a word on where it
// lives when it is not there.
func loadNodeKey(path string) (crypto.Signer, error) {
	k, err := loadKey(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (the node's key is DATA/keys/node.key: run from the directory aglxd runs in, or pass --key)", err)
	}
	return k, err
}

func loadKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := protocol.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s is not a private key (PKCS #8 PEM, as aglx keygen writes): %w", path, err)
	}
	return k, nil
}

// signFrames decodes every frame in the inputs, signs each with key, and
// returns them encoded again (with a correct CONTENT-LENGTH).
func signFrames(key crypto.Signer, inputs [][]byte) ([][]byte, error) {
	var out [][]byte
	for _, in := range inputs {
		dec := protocol.NewDecoder(bytes.NewReader(in), protocol.DecoderOptions{BodySizeMax: protocol.BodySizeMaxLimit})
		var buf []byte
		for {
			f, err := dec.Decode()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			f.Body = withTimestamp(f.Body, time.Now())
			if err := protocol.SignFrame(key, f); err != nil {
				return nil, fmt.Errorf("signing %s from %s: %w", f.Type(), f.From(), err)
			}
			buf = protocol.AppendFrame(buf, f)
		}
		out = append(out, buf)
	}
	return out, nil
}

// withTimestamp adds a "timestamp" member with now to a JSON object body
// that has none: the node refuses a signed message without one (it is
// what makes a captured message stale), and a frame written by hand
// easily lacks it. An empty body becomes an object with the timestamp
// alone (signing makes an empty body "{}", which would lack it). Anything
// else is returned as it is, byte for byte; the member is put first, so
// no other text moves.
func withTimestamp(body []byte, now time.Time) []byte {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Appendf(nil, `{"timestamp": %q}`, now.UTC().Format(stampFormat))
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil || members == nil {
		return body
	}
	if _, ok := members["timestamp"]; ok {
		return body
	}
	open := bytes.IndexByte(body, '{')
	member := fmt.Sprintf(`"timestamp": %q`, now.UTC().Format(stampFormat))
	if len(members) > 0 {
		member += ", "
	}
	out := make([]byte, 0, len(body)+len(member))
	out = append(out, body[:open+1]...)
	out = append(out, member...)
	return append(out, body[open+1:]...)
}

// stampFormat is how aglx stamps a body: RFC 3339 in UTC with
// milliseconds. A stamp in whole seconds made a frame file sent again
// within the same second the same signed message as the first, which the
// node takes once (a reward, a request, an offer) or, refused once,
// refuses again (docs/LEDGER.md).
const stampFormat = "2006-01-02T15:04:05.000Z07:00"

// runSign signs frames from files or stdin and prints them.
func runSign(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := newFlagSet("sign")
	keyPath := fs.String("key", "", "private key file (from aglx keygen); required")
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *keyPath == "" {
		return errors.New("--key is required")
	}
	key, err := loadKey(*keyPath)
	if err != nil {
		return err
	}
	inputs, err := readInputs(files, stdin)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(inputs, func(b []byte) bool { return len(bytes.TrimSpace(b)) > 0 }) {
		// As aglx send says: signing nothing printed nothing and exited 0,
		// and a pipe into send then failed far from the cause (helper-81).
		return errors.New("nothing to sign: the input holds no frame")
	}
	signed, err := signFrames(key, inputs)
	if err != nil {
		return err
	}
	for _, b := range signed {
		if _, err := stdout.Write(b); err != nil {
			return err
		}
	}
	return nil
}
