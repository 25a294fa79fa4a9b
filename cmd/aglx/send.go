package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
)

// runSend writes the input bytes to the node unchanged (so a frame's exact
// bytes, odd separator lines included, reach the node), half-closes, and
// prints every reply until the node closes. It exits 1 if any reply is an
// error, or if the node closed before answering every frame it owes a
// reply. With --udp each input (file, or stdin) is sent as one datagram.
func runSend(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := newFlagSet("send")
	addr := fs.String("addr", "", "node address, host:port (default "+bridge.DefaultTCPAddr+", with --tls "+bridge.DefaultTLSAddr+")")
	udp := fs.Bool("udp", false, "send each input as one UDP datagram (no replies are awaited)")
	useTLS := fs.Bool("tls", false, "connect with TLS (the node's --tls-listen port, 2596 by default); security messages need it")
	ca := fs.String("ca", "", "with --tls: trust the certificate(s) in this PEM file (for a self-signed node: DATA/tls/cert.pem)")
	keyPath := fs.String("key", "", "sign every frame with this private key before sending (see aglx keygen)")
	pin := fs.String("pin", "", "with --tls: trust exactly the certificate with this SHA-256 fingerprint (aglxd logs it at start)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if (*ca != "" || *pin != "") && !*useTLS {
		return errors.New("--ca and --pin say whom to trust over TLS; add --tls (without it the frames would go in the clear)")
	}
	if *udp && *useTLS {
		// --udp sent the frames in the clear, to the TLS port by default,
		// where nothing takes a datagram, and said it had sent them.
		return errors.New("--udp and --tls: UDP has no TLS (the node's UDP port takes datagrams in the clear); leave out --udp to send over TLS")
	}
	if *addr == "" {
		*addr = bridge.DefaultTCPAddr
		if *useTLS {
			*addr = bridge.DefaultTLSAddr
		}
	}
	inputs, err := readInputs(files, stdin)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(inputs, func(b []byte) bool { return len(bytes.TrimSpace(b)) > 0 }) {
		return errors.New("nothing to send: the input holds no frame")
	}
	if *keyPath != "" {
		key, err := loadKey(*keyPath)
		if err != nil {
			return err
		}
		if inputs, err = signFrames(key, inputs); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *udp {
		return sendUDP(ctx, *addr, inputs, stdout)
	}
	var c *bridge.Client
	if *useTLS {
		c, err = dialTLS(ctx, *addr, *ca, *pin)
	} else if c, err = bridge.Dial(ctx, *addr); err != nil {
		err = fmt.Errorf("%w (is a node serving AGLX at %s? --addr names it)", err, *addr)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.Conn().SetDeadline(dl)
	}
	// Write in the background: a node may answer before it has read all.
	werr := make(chan error, 1)
	go func() {
		for _, in := range inputs {
			if err := c.Write(in); err != nil {
				werr <- err
				return
			}
		}
		werr <- c.CloseWrite()
	}()
	failed, tlsOnly := false, false
	replies := 0
	for {
		f, err := c.ReadReply()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading replies: %w", err)
		}
		replies++
		if f.Type() == "error" {
			failed = true
			// The node's TLS port answers a frame in the clear so.
			tlsOnly = tlsOnly || bytes.Contains(f.Body, []byte("over TLS only"))
		}
		stdout.Write(protocol.Encode(f))
		fmt.Fprintln(stdout)
	}
	if err := <-werr; err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	want := repliesOwed(inputs)
	if replies == 0 && want > 0 {
		// Most often the TLS port spoken to in the clear by a node from
		// before 2026-12-01: the handshake failed and it closed without a
		// word. (Fewer replies than owed but some is a node that closed
		// on a fault it answered.)
		return fmt.Errorf("the node closed the connection without a reply to %d frame(s) that get one (on the TLS port, use --tls)", want)
	}
	if tlsOnly && !*useTLS {
		return fmt.Errorf("%s is the node's TLS port: use --tls", *addr)
	}
	if failed {
		return exitCode(1)
	}
	if replies < want {
		// No error among the replies, and fewer than owed: the node
		// stopped reading (a Shutdown stops at the next frame boundary)
		// and closed, and the frames after the last reply were neither
		// answered nor, most likely, stored. This exited 0.
		return fmt.Errorf("the node closed the connection after answering %d of %d frame(s) that get a reply: the frames after the last reply shown got none and may not have been stored (was the node stopping?); send them again", replies, want)
	}
	return nil
}

// dialTLS connects to addr over TLS, trusting what --ca and --pin say and
// nothing else. Only a connection that failed hints at the address: a
// --ca or --pin that cannot be used is refused before anything is dialled,
// and a certificate refused came from a node that answered there, so an
// error blaming the address sent operators looking in the wrong place.
func dialTLS(ctx context.Context, addr, ca, pin string) (*bridge.Client, error) {
	host, _, _ := net.SplitHostPort(addr)
	if host == "127.0.0.1" || host == "::1" {
		host = "localhost"
	}
	cfg, err := bridge.ClientTLS(ca, pin, host)
	if err != nil {
		return nil, err // it names the file or the pin, and what is wrong with it
	}
	c, err := bridge.DialTLS(ctx, addr, cfg)
	var pe *bridge.PinMismatchError
	var uae x509.UnknownAuthorityError
	var ve *tls.CertificateVerificationError
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &pe):
		return nil, fmt.Errorf("the node at %s is not the one pinned: %w; it is another node, or it has a new certificate (aglxd logs its certificate's fingerprint at start and on renewal, and GET /v1/node shows it as tls_sha256: check it there before pinning it)", addr, pe)
	case errors.As(err, &uae) && ca == "" && pin == "":
		return nil, fmt.Errorf("%w: the node's certificate is its own; trust it with --ca DATA/tls/cert.pem or --pin FINGERPRINT (aglxd logs it at start)", err)
	case errors.As(err, &ve):
		return nil, fmt.Errorf("%w (the node at %s answered; its certificate failed the check against --ca)", err, addr)
	}
	return nil, fmt.Errorf("%w (is a node serving AGLX over TLS at %s? --addr names it)", err, addr)
}

// repliesOwed is how many replies the node owes for inputs, which go out
// as one byte stream: one for every frame but an ack or error (never
// answered, even when refused), and one for a fault that ends the stream,
// after which the node reads no more.
func repliesOwed(inputs [][]byte) int {
	readers := make([]io.Reader, len(inputs))
	for i, in := range inputs {
		readers[i] = bytes.NewReader(in)
	}
	dec := protocol.NewDecoder(io.MultiReader(readers...), protocol.DecoderOptions{})
	n := 0
	for {
		f, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return n
		}
		var pe *protocol.Error
		if err != nil && (!errors.As(err, &pe) || pe.Fatal) {
			return n + 1
		}
		if f == nil {
			n++
			continue
		}
		if info, ok := protocol.Lookup(f.Type()); !ok || !info.NoReply {
			n++
		}
	}
}

func readInputs(files []string, stdin io.Reader) ([][]byte, error) {
	if len(files) == 0 {
		b, err := io.ReadAll(stdin)
		return [][]byte{b}, err
	}
	out := make([][]byte, 0, len(files))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// sendUDP sends each input as one datagram. The node answers no datagram
// (docs/PROTOCOL.md), so it says what it sent and where to look instead of
// leaving the terminal silent.
func sendUDP(ctx context.Context, addr string, inputs [][]byte, stdout io.Writer) error {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	for _, in := range inputs {
		if _, err := nc.Write(in); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(stdout, "sent %d datagram(s) to %s; UDP gets no reply: `aglx tail` shows what was stored, /v1/stats counts udp_appended and udp_refused\n", len(inputs), addr)
	return err
}
