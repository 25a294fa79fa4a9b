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
	r := bytes.NewReader(b)
	d := NewDecoder(r, opts)
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
