package bridge

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/aglx/ledger/protocol"
)

// Client is a minimal AGLX/TCP client: it writes frames as given and reads
// the node's replies. `aglx send`, the tests and the benchmarks use it.
type Client struct {
	nc  net.Conn
	bw  *bufio.Writer
	dec *protocol.Decoder
}

// Dial connects to an AGLX node at addr (host:port).
func Dial(ctx context.Context, addr string) (*Client, error) {
	return dialBounded(ctx, addr, protocol.BodySizeMaxLimit)
}

// DialTLS connects to an AGLX node's TLS port.
func DialTLS(ctx context.Context, addr string, cfg *tls.Config) (*Client, error) {
	d := tls.Dialer{Config: cfg}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return NewClient(nc), nil
}

// NewClient wraps an established connection (plain or TLS).
func NewClient(nc net.Conn) *Client { return newClientBounded(nc, protocol.BodySizeMaxLimit) }

// dialBounded is Dial for a client that reads replies of at most bodyMax
// bytes of body: the relay, which needs only a reply's TYPE and STATUS.
func dialBounded(ctx context.Context, addr string, bodyMax int) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return newClientBounded(nc, bodyMax), nil
}

func newClientBounded(nc net.Conn, bodyMax int) *Client {
	return &Client{
		nc:  nc,
		bw:  bufio.NewWriterSize(nc, writeBufferSize),
		dec: protocol.NewDecoder(nc, protocol.DecoderOptions{BodySizeMax: bodyMax}),
	}
}

// Write buffers raw bytes: one or more frames, sent exactly as given.
func (c *Client) Write(b []byte) error {
	_, err := c.bw.Write(b)
	return err
}

// WriteFrame buffers an encoded frame.
func (c *Client) WriteFrame(f *protocol.Frame) error { return c.Write(protocol.Encode(f)) }

// Flush sends what is buffered.
func (c *Client) Flush() error { return c.bw.Flush() }

// CloseWrite flushes and half-closes the connection: the node answers what
// it has read and then closes its side.
func (c *Client) CloseWrite() error {
	if err := c.bw.Flush(); err != nil {
		return err
	}
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadReply reads the next reply frame; io.EOF once the node has closed.
func (c *Client) ReadReply() (*protocol.Frame, error) {
	f, err := c.dec.Decode()
	if err != nil {
		return nil, err
	}
	return f, nil
}

// PeerClosed reports whether the other side has closed or reset the
// connection, waiting at most wait for a sign of it. A write to a closed
// connection can still succeed, so a message that gets no reply would be
// lost without a word; the relay asks before sending one on a connection it
// kept from an earlier delivery.
func (c *Client) PeerClosed(wait time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(wait))
	defer c.nc.SetReadDeadline(time.Time{})
	err := c.dec.Probe()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// Buffered reports how many bytes were read from the connection and not
// yet decoded, past the white space that ends the last reply: on a
// connection whose replies are all read, bytes nobody asked for. The line
// end after a reply's body stays in the read buffer, and counted, it
// had the relay drop every kept connection before its next message.
func (c *Client) Buffered() int { return c.dec.SkipBufferedBlank() }

// Conn is the underlying connection.
func (c *Client) Conn() net.Conn { return c.nc }

// Close closes the connection.
func (c *Client) Close() error { return c.nc.Close() }
