package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
)

// TestSendFailsWhenFramesGoUnanswered: a node that stops reading (its
// Shutdown, at the next frame boundary) answers the frames it has read and
// closes, and the rest get no reply and are not stored. aglx send printed
// the one reply and exited 0, so a script sending a batch of transfers
// while the node restarted took every one as done.
func TestSendFailsWhenFramesGoUnanswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // answers the first frame, then stops, as a node stopping does
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		d := protocol.NewDecoder(c, protocol.DecoderOptions{})
		if _, err := d.Decode(); err != nil {
			return
		}
		c.Write(protocol.Encode(&protocol.Frame{Transport: protocol.TransportTCP, Body: []byte("{}"), Headers: []protocol.Header{
			{Name: protocol.HeaderFrom, Value: "registry://localhost"},
			{Name: protocol.HeaderTo, Value: "agent://a.local"},
			{Name: protocol.HeaderType, Value: "ack"},
			{Name: protocol.HeaderStatus, Value: "200"},
		}}))
	}()
	var in strings.Builder
	for i := range 3 {
		fmt.Fprintf(&in, "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\nID: t%d\n\n{}\n", i)
	}
	var out strings.Builder
	err = runSend([]string{"--addr", ln.Addr().String()}, strings.NewReader(in.String()), &out)
	if err == nil {
		t.Fatalf("aglx send of 3 frames, 1 answered before the node closed = exit 0; want a failure\n%s", out.String())
	}
	if !strings.Contains(err.Error(), "1 of 3") {
		t.Fatalf("aglx send = %v; want it to say 1 of 3 frames were answered", err)
	}
}

// TestSendRefusesUDPWithTLS: --udp with --tls sent the frames as plain
// datagrams, to the TLS port by default where nothing takes UDP, and said
// it had sent them: --tls was dropped without a word, as --ca and --pin
// without --tls are not.
func TestSendRefusesUDPWithTLS(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	frame := "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\nTYPE: task.cancel\n\n{}\n"
	var out strings.Builder
	err = runSend([]string{"--udp", "--tls", "--addr", pc.LocalAddr().String()}, strings.NewReader(frame), &out)
	if err == nil || !strings.Contains(err.Error(), "--tls") {
		t.Fatalf("aglx send --udp --tls = %v; want it refused, naming --tls\n%s", err, out.String())
	}
	pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := pc.ReadFrom(make([]byte, 1024)); err == nil {
		t.Fatalf("aglx send --udp --tls sent a datagram of %d bytes in the clear", n)
	}
}
