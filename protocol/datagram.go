package protocol

import (
	"bytes"
	"io"
)

// DatagramSizeMax bounds one UDP datagram: the largest a UDP payload can be.
const DatagramSizeMax = 65507 // bytes

// DecodeDatagram decodes one UDP datagram, which holds exactly one frame.
// Anything but white space after the frame is refused, since a datagram has
// no next frame it could belong to.
func DecodeDatagram(b []byte, opts DecoderOptions) (*Frame, error) {
	// The read buffer is sized to the datagram, not to a stream's 64 KiB:
	// every line fits in it all the same, and a flood of small datagrams
	// does not allocate 64 KiB for each.
	d := newDecoderSize(bytes.NewReader(b), len(b)+1, opts)
	f, err := d.Decode()
	if err == io.EOF {
		return nil, Errorf(StatusBadRequest, "the datagram is empty")
	}
	if err != nil {
		return f, err
	}
	if err := d.skipBlank(); err != io.EOF {
		return f, Errorf(StatusBadRequest, "the datagram holds more than one frame")
	}
	return f, nil
}
