package ledger

// TestLedgerPropertiesWide widens TestLedgerProperties' generator where it
// never goes (helper-57): signed messages named by their content
// (Event.SignedName) and copies of them under new IDs, amounts at the
// limits, and a receive clock that steps back (frames read on two
// connections are appended in either order). It keeps the same checks,
// plus one per signed offer: a signed task.assign places one hold however
// many copies come.

import (
	"fmt"
	"testing"
	"time"

	"github.com/aglx/ledger/protocol"
	"pgregory.net/rapid"
)

var wideAmounts = []string{"0.000000000001", "1", "2.5", "100",
	"999999999999999999999.999999999999", "500000000000000000000", "999999999999999999999"}

// contentName stands for the hash of what a signature covers: equal
// content, equal name.
func contentName(e Event) string {
	c := ""
	if e.Credits != nil {
		c = e.Credits.String()
	}
	return fmt.Sprintf("%T|%s|%s|%s|%+v", e.Payload, e.From, e.To, c, e.Payload)
}

func drawWideEvent(t *rapid.T, h *harness) Event {
	agent := func(l string) string { return rapid.SampledFrom(propAgents).Draw(t, l) }
	amount := func() string {
		if rapid.IntRange(0, 3).Draw(t, "wide") == 0 {
			return rapid.SampledFrom(wideAmounts).Draw(t, "wide amount")
		}
		return rapid.SampledFrom(propAmounts).Draw(t, "amount")
	}
	if rapid.IntRange(0, 14).Draw(t, "back") == 0 {
		// Frames read on two connections are appended in either order,
		// and the wall clock steps: ReceivedAt is not monotonic in the log.
		h.now = h.now.Add(-time.Duration(rapid.IntRange(1, 120).Draw(t, "back minutes")) * time.Minute)
	}
	msgID := func() string { return drawID(t, "id", 6, "msg id") }
	switch rapid.IntRange(0, 9).Draw(t, "wide kind") {
	case 0: // a signed reward, no task_id, under any ID
		e := reward(agent("from"), agent("to"), amount(), "", AuthValid)
		e.MessageID = msgID()
		e.SignedName = contentName(e)
		return e
	case 1: // a signed adjustment from the node
		sign := rapid.SampledFrom([]string{"", "-"}).Draw(t, "sign")
		e := adjustEv(agent("to"), sign+amount(), drawID(t, "t", 40, "tx"), msgID())
		e.SignedName = contentName(e)
		return e
	case 2: // a signed offer without task_id
		e := assign(agent("owner"), agent("worker"), amount(), "")
		e.MessageID = msgID()
		e.SignedName = contentName(e)
		return e
	case 3: // a copy of an earlier signed message under a new ID
		var found []int
		for i, x := range h.log {
			if x.SignedName != "" {
				found = append(found, i)
			}
		}
		if len(found) > 0 {
			e := h.log[rapid.SampledFrom(found).Draw(t, "copy")]
			e.Seq, e.EventID, e.Time, e.MessageID = 0, "", time.Time{}, msgID()
			return e
		}
	case 4:
		return mint(agent("to"), amount(), fmt.Sprintf("w%d", h.seq+1))
	}
	return drawEvent(t, h)
}

func wideKey(e Event) string {
	if e.SignedName != "" && (e.Auth == AuthValid || e.Auth == AuthNode) {
		switch p := e.Payload.(type) {
		case *protocol.CreditReward:
			if p.TaskID == "" {
				return "signed " + e.SignedName
			}
		case *protocol.CreditAdjust:
			return "signed " + e.SignedName
		}
	}
	return idempotencyKey(e)
}

func TestLedgerPropertiesWide(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		posted := map[string]int{}
		offers := map[string]int{}
		var outcomes []Outcome
		for range rapid.IntRange(20, 300).Draw(t, "events") {
			e := drawWideEvent(t, h)
			postings, holds := h.l.postings.len(), h.l.holds.rows.len()
			o := h.apply(e)
			e = h.log[len(h.log)-1]
			outcomes = append(outcomes, o)
			booked := h.l.postings.len() - postings
			if booked != 0 && (booked != 1 || !o.Posted()) {
				t.Fatalf("Apply(%s) made %d postings, Posted() = %v", describe(e), booked, o.Posted())
			}
			if (o.Status >= 400 || o.Replayed) && (booked != 0 || h.l.holds.rows.len() != holds) {
				t.Fatalf("Apply(%s) = %d %s replayed=%v, yet booked %d postings and %d holds", describe(e), o.Status, o.Reason, o.Replayed, booked, h.l.holds.rows.len()-holds)
			}
			if o.Posted() {
				key := wideKey(e)
				if posted[key]++; posted[key] > 1 {
					t.Fatalf("Apply(%s) posted %q a second time", describe(e), key)
				}
			}
			if p, ok := e.Payload.(*protocol.TaskAssign); ok && p.TaskID == "" && e.SignedName != "" && h.l.holds.rows.len() > holds {
				if offers[e.SignedName]++; offers[e.SignedName] > 1 {
					t.Fatalf("Apply(%s) placed a second hold for one signed offer", describe(e))
				}
			}
			if err := h.l.Check(); err != nil {
				t.Fatalf("after Apply(%s): Check() = %v", describe(e), err)
			}
		}
		checkReplay(t, h, outcomes)
	})
}
