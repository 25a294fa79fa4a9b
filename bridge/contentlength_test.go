package bridge

import (
	"strings"
	"testing"
	"time"
)

// TestLongContentLengthIsOnlyAWrongNumber: PROTOCOL.md's table says a
// frame with a body and any CONTENT-LENGTH but 0 is accepted (a wrong
// number is stored as sent), that CONTENT-LENGTH: 0 on a frame without a
// body is accepted, and that only a value that is not decimal digits
// alone is refused. A value of 19 digits or more was refused (400) as
// "not a non-negative integer", which it is, and 0 written with 19 zeros
// was refused as well; the frame behind each still decoded, so the
// refusal was of the length's spelling alone.
func TestLongContentLengthIsOnlyAWrongNumber(t *testing.T) {
	l, quiet := openBenchLog(t)
	c := serveAndDial(t, New(l, Config{}, quiet))
	const head = "AGLX/1.0 TCP\nFROM: agent://a.local\nTO: agent://b.local\n"
	frames := []struct{ name, frame string }{
		{"a body under a 20-digit length", head + "TYPE: task.result\nCONTENT-LENGTH: 99999999999999999999\n\n{\"task_id\":\"t1\",\"status\":\"completed\"}\n"},
		{"a body under a 40-digit length", head + "TYPE: task.result\nCONTENT-LENGTH: " + strings.Repeat("7", 40) + "\n\n{\"task_id\":\"t2\",\"status\":\"completed\"}\n"},
		{"no body under 0 in 19 digits", head + "TYPE: registry.ack\nCONTENT-LENGTH: " + strings.Repeat("0", 19) + "\n\n"},
	}
	for _, f := range frames {
		c.Write([]byte(f.frame))
	}
	c.Flush()
	c.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, f := range frames {
		reply, err := c.ReadReply()
		if err != nil {
			t.Fatalf("%s: no reply: %v", f.name, err)
		}
		if reply.Type() != "ack" {
			t.Errorf("%s: %s %s %s; want it accepted (PROTOCOL.md: a wrong CONTENT-LENGTH is stored as sent)", f.name, reply.Type(), reply.Value("STATUS"), reply.Body)
		}
	}
}
