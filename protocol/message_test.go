package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// wantPayload is the payload type of every TYPE, written out independently
// of the registry so that a wrong entry there is caught.
var wantPayload = map[string]Payload{
	"task.assign":            &TaskAssign{},
	"task.result":            &TaskResult{},
	"task.reject":            &TaskReject{},
	"task.retry":             &TaskRetry{},
	"task.cancel":            &TaskCancel{},
	"registry.update":        &RegistryUpdate{},
	"registry.ack":           &RegistryAck{},
	"registry.fetch":         &RegistryFetch{},
	"registry.list":          &RegistryList{},
	"registry.sync":          &RegistrySync{},
	"registry.exchange":      &RegistryExchange{},
	"agent.announce":         &AgentAnnounce{},
	"credit.transfer":        &CreditTransfer{},
	"credit.received":        &CreditReceived{},
	"credit.request":         &CreditRequest{},
	"credit.approve":         &CreditApprove{},
	"credit.deny":            &CreditDeny{},
	"credit.balance":         &CreditBalance{},
	"credit.reward":          &CreditReward{},
	"credit.adjust":          &CreditAdjust{},
	"mentor.request":         &MentorRequest{},
	"mentor.feedback":        &MentorFeedback{},
	"mentor.register":        &MentorRegister{},
	"mentor.report":          &MentorReport{},
	"auth.request":           &AuthRequest{},
	"auth.response":          &AuthResponse{},
	"key.rotate":             &KeyRotate{},
	"zone.join":              &ZoneJoin{},
	"zone.confirm":           &ZoneConfirm{},
	"zone.deny":              &ZoneDeny{},
	"zone.leave":             &ZoneLeave{},
	"ack":                    &Ack{},
	"error":                  &ErrorPayload{},
	"shutdown.request":       &ShutdownRequest{},
	"shutdown.response":      &ShutdownResponse{},
	"plan.approval":          &PlanApproval{},
	"plan.approval.response": &PlanApprovalResponse{},
}

// extraExamples are valid bodies for the TYPEs the reference shows no example
// of (the generic and handshake ones).
var extraExamples = map[string]string{
	"ack":                    `{"event_id": "01JBE3Q4R8W5X9ZK2M7N6P0T1V", "seq": 17, "duplicate": true}`,
	"error":                  `{"status": 400, "reason": "field \"amount\" is required"}`,
	"shutdown.request":       `{"request_id": "a1b2c3d4", "reason": "maintenance"}`,
	"shutdown.response":      `{"request_id": "a1b2c3d4", "approve": false, "reason": "busy with a critical task"}`,
	"plan.approval":          `{"request_id": "p-77", "plan": "Rewrite the auth module on JWT"}`,
	"plan.approval.response": `{"request_id": "p-77", "approve": false, "feedback": "not before next month's refactor"}`,
}

type referenceFile struct {
	name  string
	bytes []byte
}

// loadReference reads testdata/reference in name order.
func loadReference(tb testing.TB) []referenceFile {
	tb.Helper()
	paths, err := filepath.Glob("../testdata/reference/*.aglx")
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no reference frames: %v", err)
	}
	sort.Strings(paths)
	var out []referenceFile
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, referenceFile{filepath.Base(p), b})
	}
	return out
}

// validExamples returns one valid frame per known TYPE, plus every reference
// frame: the reference's own where there is one, extraExamples elsewhere.
func validExamples(tb testing.TB) map[string]*Frame {
	tb.Helper()
	out := map[string]*Frame{}
	for _, ref := range loadReference(tb) {
		f, err := NewDecoder(bytes.NewReader(ref.bytes), DecoderOptions{}).Decode()
		if err != nil {
			tb.Fatalf("Decode(%s) = %v", ref.name, err)
		}
		out[ref.name] = f
	}
	for typ, body := range extraExamples {
		out[typ] = testFrame(typ, body)
	}
	return out
}

// testFrame builds a frame from agent://alpha.local to agent://beta.local.
// Pairs in headers override or add headers; an empty value removes one.
func testFrame(typ, body string, headers ...string) *Frame {
	f := &Frame{Transport: TransportTCP}
	f.Set(HeaderFrom, "agent://alpha.local")
	f.Set(HeaderTo, "agent://beta.local")
	f.Set(HeaderType, typ)
	for i := 0; i+1 < len(headers); i += 2 {
		f.Set(headers[i], headers[i+1])
	}
	kept := f.Headers[:0]
	for _, h := range f.Headers {
		if h.Value != "" {
			kept = append(kept, h)
		}
	}
	f.Headers = kept
	if body != "" {
		f.Body = []byte(body)
	}
	return f
}

func TestParseReference(t *testing.T) {
	for _, ref := range loadReference(t) {
		t.Run(ref.name, func(t *testing.T) {
			f, err := NewDecoder(bytes.NewReader(ref.bytes), DecoderOptions{}).Decode()
			if err != nil {
				t.Fatalf("Decode(%s) = %v", ref.name, err)
			}
			m, err := Parse(f)
			if err != nil {
				t.Fatalf("Parse(%q) = %v, want a message", ref.name, err)
			}
			// The file name says which TYPE it holds: 15-credit.transfer.aglx.
			typ := strings.TrimSuffix(ref.name[strings.IndexByte(ref.name, '-')+1:], ".aglx")
			if m.Info.Name != typ {
				t.Errorf("Parse(%q).Info.Name = %q, want %q", ref.name, m.Info.Name, typ)
			}
			if got, want := reflect.TypeOf(m.Payload), reflect.TypeOf(wantPayload[typ]); got != want {
				t.Errorf("Parse(%q).Payload is %v, want %v", ref.name, got, want)
			}
			if m.From.IsZero() || m.To.IsZero() != (typ == TypeAgentAnnounce) {
				t.Errorf("Parse(%q): From = %v, To = %v", ref.name, m.From, m.To)
			}
		})
	}
}

// TestParseReferenceValues spot-checks that values arrive exactly.
func TestParseReferenceValues(t *testing.T) {
	byName := map[string]*Message{}
	for name, f := range validExamples(t) {
		m, err := Parse(f)
		if err != nil {
			t.Fatalf("Parse(%q) = %v", name, err)
		}
		byName[name] = m
	}
	tests := []struct {
		name string
		got  func() string
		want string
	}{
		{"CREDITS header", func() string { return byName["01-task.assign.aglx"].Credits.String() }, "2"},
		{"no CREDITS header", func() string { return fmt.Sprint(byName["02-task.assign.aglx"].Credits) }, "<nil>"},
		{"transfer amount", func() string { return byName["15-credit.transfer.aglx"].Payload.(*CreditTransfer).Amount.String() }, "3"},
		{"deny balance", func() string { return byName["19-credit.deny.aglx"].Payload.(*CreditDeny).Balance.String() }, "1.5"},
		{"adjustment keeps its scale", func() string { return byName["22-credit.adjust.aglx"].Payload.(*CreditAdjust).Adjustment.String() }, "-1.0"},
		{"credits earned", func() string { return byName["26-mentor.report.aglx"].Payload.(*MentorReport).CreditsEarned.String() }, "52.5"},
		{"timestamp text", func() string { return byName["15-credit.transfer.aglx"].Payload.(*CreditTransfer).Timestamp.Text }, "2025-10-29T19:02:40Z"},
		{"entry address", func() string {
			return byName["11-registry.list.aglx"].Payload.(*RegistryList).Entries[1].AgentURI.String()
		}, "agent://node60.local"},
		{"registry FROM", func() string { return byName["09-registry.ack.aglx"].From.String() }, "registry://global.aglx.net"},
		{"announce has no TO", func() string { return byName["14-agent.announce.aglx"].To.String() }, ""},
		{"task payload kept raw", func() string {
			return string(byName["01-task.assign.aglx"].Payload.(*TaskAssign).Payload)
		}, "{\n        \"dataset_url\": \"http://alpha.local/data/custom.csv\"\n    }"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.got(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name  string
		frame *Frame
	}{
		{"agent.announce without TO", testFrame(TypeAgentAnnounce, `{"agent_name": "Node15"}`, HeaderTo, "")},
		{"agent.announce with TO", testFrame(TypeAgentAnnounce, `{"agent_name": "Node15"}`)},
		{"ack without body", testFrame(TypeAck, "")},
		{"ack with any members", testFrame(TypeAck, `{"task_id": "t1", "status": "OK", "nested": {"a": [1, 2]}}`)},
		{"credit.balance without body", testFrame(TypeCreditBalance, "", HeaderTo, "agent://alpha.local")},
		{"registry.ack without body", testFrame(TypeRegistryAck, "")},
		{"amount as a string", testFrame(TypeCreditTransfer, `{"amount": "97.5", "currency": "AGLX", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-1"}`)},
		{"amount with exponent", testFrame(TypeCreditTransfer, `{"amount": 25E-1, "currency": "AGLX", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-1"}`)},
		{"timestamp with offset and fraction", testFrame(TypeTaskReject, `{"task_id": "t1", "reason": "no", "timestamp": "2025-10-29T19:02:40.123456+02:00"}`)},
		{"unknown members ignored", testFrame(TypeTaskCancel, `{"task_id": "t1", "x-trace": {"id": 7}, "AMOUNT": "not looked at"}`)},
		{"null optional member is absent", testFrame(TypeTaskAssign, `{"task": "nlp.analyze", "priority": null}`)},
		{"negative adjustment", testFrame(TypeCreditAdjust, `{"transaction_id": "tx-1", "adjustment": -0.5, "reason": "refund", "timestamp": "2025-10-29T19:09:35Z"}`)},
		{"registry address with port", testFrame(TypeRegistryUpdate, `{"agent_name": "n"}`, HeaderTo, "registry://global.aglx.net:2594")},
		{"empty entries", testFrame(TypeRegistryList, `{"entries": []}`)},
		{"CREDITS as a decimal", testFrame(TypeTaskAssign, `{"task": "x"}`, HeaderCredits, "2.5")},
		{"ed25519 signature", testFrame(TypeCreditTransfer, `{"amount": 1, "currency": "AGLX", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-1", "signature": "ed25519:00ff"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse(tt.frame); err != nil {
				t.Errorf("Parse(%q) = %v, want a message", tt.frame.Body, err)
			}
		})
	}
}

const (
	okTransfer = `"currency": "AGLX", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-1"`
	okTime     = `"timestamp": "2025-10-29T19:02:40Z"`
)

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name  string
		frame *Frame
		want  string // the whole reason, or a part of it
	}{
		// Headers.
		{"missing TYPE", testFrame("", `{}`, HeaderType, ""), "the frame has no TYPE header"},
		{"unknown TYPE", testFrame("foo.bar", `{}`), `unknown TYPE "foo.bar"`},
		{"TYPE in other case", testFrame("Credit.Transfer", `{}`), `did you mean "credit.transfer"?`},
		{"missing FROM", testFrame(TypeAck, `{}`, HeaderFrom, ""), "the frame has no FROM header"},
		{"bad FROM", testFrame(TypeAck, `{}`, HeaderFrom, "agent:/x"), `FROM "agent:/x" is not an AGLX address; expected agent://NAME or registry://NAME`},
		{"FROM with path", testFrame(TypeAck, `{}`, HeaderFrom, "agent://a/b"), `FROM "agent://a/b" is not an AGLX address (a path is not allowed)`},
		{"task.assign without TO", testFrame(TypeTaskAssign, `{"task": "x"}`, HeaderTo, ""), "the frame has no TO header"},
		{"bad TO on announce", testFrame(TypeAgentAnnounce, `{"agent_name": "n"}`, HeaderTo, "beta.local"), `TO "beta.local" is not an AGLX address`},
		{"CREDITS zero", testFrame(TypeTaskAssign, `{"task": "x"}`, HeaderCredits, "0"), `CREDITS header must be positive, got "0"`},
		{"CREDITS negative", testFrame(TypeTaskAssign, `{"task": "x"}`, HeaderCredits, "-2"), "CREDITS header must be positive"},
		{"CREDITS not a number", testFrame(TypeTaskAssign, `{"task": "x"}`, HeaderCredits, "two"), `CREDITS header holds "two", which is not a decimal number`},
		{"CREDITS NaN", testFrame(TypeTaskAssign, `{"task": "x"}`, HeaderCredits, "NaN"), "which is not a finite number"},

		// The body as a whole.
		{"body missing", testFrame(TypeCreditTransfer, ""), "the body is missing"},
		{"body not an object", testFrame(TypeTaskCancel, `["task_id"]`), "the body must be a JSON object"},
		{"body not JSON", testFrame(TypeTaskCancel, `{"task_id": }`), "the body is not valid JSON"},
		{"two values", testFrame(TypeTaskCancel, `{"task_id": "a"} {}`), "the body holds more than one JSON value"},
		{"member twice", testFrame(TypeCreditTransfer, `{"amount": 1, "amount": 1000, `+okTransfer+`}`), `member "amount" appears twice`},
		{"member twice by escape", testFrame(TypeCreditTransfer, `{"amount": 1, "\u0061mount": 1000, `+okTransfer+`}`), `member "amount" appears twice`},
		{"nested member twice", testFrame(TypeRegistryExchange, `{"known_agents": [{"agent_uri": "agent://a", "agent_uri": "agent://b"}]}`), `member "known_agents[0].agent_uri" appears twice`},
		{"too deep", testFrame(TypeAck, strings.Repeat(`{"a":`, JSONDepthMax+1)+`1`+strings.Repeat(`}`, JSONDepthMax+1)), "nested deeper than 64 levels"},

		// Missing required fields.
		{"transfer without amount", testFrame(TypeCreditTransfer, `{`+okTransfer+`}`), `field "amount" is required`},
		{"transfer with null amount", testFrame(TypeCreditTransfer, `{"amount": null, `+okTransfer+`}`), `field "amount" is required`},
		{"member names are case-sensitive", testFrame(TypeCreditTransfer, `{"AMOUNT": 3, `+okTransfer+`}`), `member "AMOUNT" is the field "amount" in other letters`},
		{"a field in other letters beside it", testFrame(TypeCreditTransfer, `{"amount": 1, "AMOUNT": 1000, `+okTransfer+`}`), `member "AMOUNT" is the field "amount" in other letters`},
		{"an optional field in other letters", testFrame(TypeTaskResult, `{"task_id": "t1", "STATUS": "failed"}`), `member "STATUS" is the field "status"`},
		{"a field with a Kelvin sign for its k", testFrame(TypeTaskResult, "{\"tas\u212a_id\": \"t1\"}"), `is the field "task_id" in other letters`},
		{"a field in other letters in a list", testFrame(TypeRegistrySync, `{"entries": [{"agent_id": "a", "agent_uri": "agent://a.local", "TTL": 5}]}`), `member "entries[0].TTL" is the field "ttl"`},
		{"transfer without currency", testFrame(TypeCreditTransfer, `{"amount": 3, "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-1"}`), `field "currency" is required`},
		{"transfer without timestamp", testFrame(TypeCreditTransfer, `{"amount": 3, "currency": "AGLX", "transaction_id": "tx-1"}`), `field "timestamp" is required`},
		{"task.assign without task", testFrame(TypeTaskAssign, `{"priority": 3}`), `field "task" is required`},
		{"response without approve", testFrame(TypeShutdownResponse, `{"request_id": "r1"}`), `field "approve" is required`},
		{"error without reason", testFrame(TypeError, `{"status": 400}`), `field "reason" is required`},
		{"list without entries", testFrame(TypeRegistryList, `{}`), `field "entries" is required`},
		{"entry without address", testFrame(TypeRegistrySync, `{"entries": [{"agent_id": "a1"}]}`), `field "entries[0].agent_uri" is required`},

		// Wrong JSON types.
		{"amount true", testFrame(TypeCreditTransfer, `{"amount": true, `+okTransfer+`}`), `field "amount" must be a number`},
		{"amount object", testFrame(TypeCreditTransfer, `{"amount": {"v": 1}, `+okTransfer+`}`), `field "amount" must be a number`},
		{"priority as string", testFrame(TypeTaskAssign, `{"task": "x", "priority": "3"}`), `field "priority" must be an integer`},
		{"priority fractional", testFrame(TypeTaskAssign, `{"task": "x", "priority": 2.5}`), `field "priority" must be an integer`},
		{"task_id as number", testFrame(TypeTaskCancel, `{"task_id": 5}`), `field "task_id" must be a string`},
		{"capabilities as string", testFrame(TypeRegistryUpdate, `{"agent_name": "n", "capabilities": "nlp"}`), `field "capabilities" must be an array of strings`},
		{"approve as string", testFrame(TypePlanApprovalResponse, `{"request_id": "r", "approve": "yes"}`), `field "approve" must be true or false`},
		{"entries as object", testFrame(TypeRegistryList, `{"entries": {}}`), `field "entries" must be an array`},
		{"entry as string", testFrame(TypeRegistryList, `{"entries": ["agent://a"]}`), `field "entries[0]" must be an object`},
		{"score as string", testFrame(TypeMentorFeedback, `{"score": "0.9"}`), `field "score" must be a number`},
		{"seq negative", testFrame(TypeAck, `{"seq": -1}`), `field "seq" must be a non-negative integer`},
		{"payload not an object", testFrame(TypeTaskAssign, `{"task": "x", "payload": [1]}`), `field "payload" must be an object`},

		// Addresses in the body.
		{"bad entry address", testFrame(TypeRegistryList, `{"entries": [{"agent_id": "a", "agent_uri": "agent://ok"}, {"agent_id": "b", "agent_uri": "agent:/x"}]}`),
			`field "entries[1].agent_uri" holds "agent:/x", which is not an AGLX address; expected agent://NAME or registry://NAME`},
		{"address as number", testFrame(TypeRegistryExchange, `{"known_agents": [{"agent_uri": 7}]}`), `field "known_agents[0].agent_uri" must be a string holding agent://NAME`},

		// Timestamps.
		{"timestamp with a space", testFrame(TypeCreditReward, `{"amount": 1, "timestamp": "2025-10-29 19:08:10"}`), `field "timestamp" holds "2025-10-29 19:08:10", which is not an RFC 3339 time`},
		{"timestamp without zone", testFrame(TypeCreditReward, `{"amount": 1, "timestamp": "2025-10-29T19:08:10"}`), `field "timestamp" holds`},
		{"timestamp as number", testFrame(TypeCreditReward, `{"amount": 1, "timestamp": 1761765000}`), `field "timestamp" must be a string holding an RFC 3339 time`},
		{"since not a date", testFrame(TypeRegistryFetch, `{"mode": "update", "since": "yesterday"}`), `field "since" holds "yesterday"`},

		// Money.
		{"amount NaN", testFrame(TypeCreditTransfer, `{"amount": "NaN", `+okTransfer+`}`), `field "amount" holds "NaN", which is not a finite number`},
		{"amount Infinity", testFrame(TypeCreditTransfer, `{"amount": "Infinity", `+okTransfer+`}`), "which is not a finite number"},
		{"amount 1e999999", testFrame(TypeCreditTransfer, `{"amount": 1e999999, `+okTransfer+`}`), `field "amount" holds "1e999999", which is out of range`},
		{"amount 35 digits", testFrame(TypeCreditTransfer, `{"amount": 12345678901234567890123456789012345, `+okTransfer+`}`), "which has 35 significant digits; at most 34 are allowed"},
		{"amount hex", testFrame(TypeCreditTransfer, `{"amount": "0x10", `+okTransfer+`}`), "hexadecimal is not allowed"},
		{"amount leading plus", testFrame(TypeCreditTransfer, `{"amount": "+3", `+okTransfer+`}`), "a leading '+' is not allowed"},
		{"amount empty string", testFrame(TypeCreditTransfer, `{"amount": "", `+okTransfer+`}`), `field "amount" is empty`},
		{"amount zero", testFrame(TypeCreditTransfer, `{"amount": 0, `+okTransfer+`}`), `field "amount" must be positive, got "0"`},
		{"amount negative", testFrame(TypeCreditTransfer, `{"amount": -3, `+okTransfer+`}`), `field "amount" must be positive, got "-3"`},
		{"amount negative zero", testFrame(TypeCreditTransfer, `{"amount": "-0.0", `+okTransfer+`}`), `field "amount" must be positive`},
		{"currency unknown", testFrame(TypeCreditTransfer, `{"amount": 3, "currency": "EUR", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-1"}`), `field "currency" holds "EUR"; the only currency is "AGLX"`},
		{"currency lower case", testFrame(TypeCreditTransfer, `{"amount": 3, "currency": "aglx", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx-1"}`), `the only currency is "AGLX"`},
		{"adjustment zero", testFrame(TypeCreditAdjust, `{"transaction_id": "tx-1", "adjustment": 0.00, "reason": "r", `+okTime+`}`), `field "adjustment" must not be zero`},
		{"requested negative", testFrame(TypeCreditRequest, `{"requested_amount": -2, `+okTime+`}`), `field "requested_amount" must be positive`},
		{"negative total", testFrame(TypeCreditBalance, `{"spent_total": -1}`), `field "spent_total" must not be negative`},

		// Other rules.
		{"transaction id with space", testFrame(TypeCreditTransfer, `{"amount": 3, "currency": "AGLX", "timestamp": "2025-10-29T19:02:40Z", "transaction_id": "tx 1"}`), `field "transaction_id" may hold only visible ASCII`},
		{"transaction id too long", testFrame(TypeCreditApprove, `{"approved_amount": 1, "transaction_id": "`+strings.Repeat("x", IDSizeMax+1)+`"}`), `field "transaction_id" is longer than 128 bytes`},
		{"signature without algorithm", testFrame(TypeRegistryUpdate, `{"agent_name": "n", "signature": "0f3c9a"}`), `field "signature" must be ALG:hex, with ALG one of rsa-sha256, ed25519`},
		{"signature unknown algorithm", testFrame(TypeRegistryUpdate, `{"agent_name": "n", "signature": "md5:0f3c9a"}`), `field "signature" uses algorithm "md5"`},
		{"signature empty value", testFrame(TypeRegistryUpdate, `{"agent_name": "n", "signature": "rsa-sha256:"}`), `field "signature" must be ALG:hex`},
		{"zone.join with rsa", testFrame(TypeZoneJoin, `{"zone_id": "z", "agent_id": "a", "signature": "rsa-sha256:00", `+okTime+`}`), `expected one of hmac-sha256`},
		{"hmac outside zones", testFrame(TypeAuthRequest, `{"agent_id": "a", "public_key": "MIIB", "signature": "hmac-sha256:00", `+okTime+`}`), `uses algorithm "hmac-sha256"`},
		{"key rotated to itself", testFrame(TypeKeyRotate, `{"old_key_id": "k1", "new_key_id": "k1", "public_key": "MIIB", `+okTime+`}`), `field "new_key_id" must differ from "old_key_id"`},
		{"fetch mode unknown", testFrame(TypeRegistryFetch, `{"mode": "delta", "since": "2025-10-20T00:00:00Z"}`), `field "mode" holds "delta"; the modes are "update" and "full"`},
		{"fetch update without since", testFrame(TypeRegistryFetch, `{"mode": "update"}`), `field "since" is required`},
		{"port out of range", testFrame(TypeRegistryUpdate, `{"agent_name": "n", "port": 70000}`), `field "port" must be from 1 to 65535, got 70000`},
		{"score above 1", testFrame(TypeMentorFeedback, `{"score": 1.5}`), `field "score" must be from 0 to 1`},
		{"retry attempt 0", testFrame(TypeTaskRetry, `{"original_task_id": "t", "attempt": 0}`), `field "attempt" must be from 1`},
		{"empty expertise", testFrame(TypeMentorRegister, `{"agent_name": "m", "expertise": []}`), `field "expertise" must list at least one entry`},
		{"error status out of range", testFrame(TypeError, `{"status": 42, "reason": "r"}`), `field "status" must be from 100 to 599`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse(tt.frame)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) = %v, %v, want a *Error containing %q", tt.frame.Body, m, err, tt.want)
			}
			if e.Status != StatusBadRequest || e.Fatal || !strings.Contains(e.Reason, tt.want) {
				t.Errorf("Parse(%q) = %v, want 400 (not fatal) containing %q", tt.frame.Body, err, tt.want)
			}
		})
	}
}

// TestRequiredFieldsMatchTags holds the payload types to one convention: a
// field whose json tag has neither omitempty nor omitzero is required, and
// Validate says so when it is absent; every other field may be left out.
// conditionallyRequired are fields a tag cannot describe: registry.fetch
// needs since in mode "update" only.
var conditionallyRequired = map[string]bool{"registry.fetch/since": true}

func TestRequiredFieldsMatchTags(t *testing.T) {
	examples := validExamples(t)
	seen := map[string]bool{}
	for name, f := range examples {
		typ := f.Type()
		if seen[typ] {
			continue
		}
		seen[typ] = true
		var members map[string]json.RawMessage
		if err := json.Unmarshal(f.Body, &members); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pt := reflect.TypeOf(wantPayload[typ]).Elem()
		for i := range pt.NumField() {
			tag := pt.Field(i).Tag.Get("json")
			field, opts, _ := strings.Cut(tag, ",")
			required := !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero")
			t.Run(typ+"/"+field, func(t *testing.T) {
				if conditionallyRequired[typ+"/"+field] {
					t.Skip("required in some forms only; covered by TestParseRejects")
				}
				if field == "" {
					t.Fatalf("%s.%s has no json tag", pt.Name(), pt.Field(i).Name)
				}
				if _, ok := members[field]; !ok && required {
					t.Fatalf("the example of %s lacks required field %q", typ, field)
				}
				rest := map[string]json.RawMessage{}
				for k, v := range members {
					if k != field {
						rest[k] = v
					}
				}
				body, _ := json.Marshal(rest)
				g := *f
				g.Body = body
				_, err := Parse(&g)
				switch want := `field "` + field + `" is required`; {
				case required && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("Parse(%q) = %v, want %q", body, err, want)
				case !required && err != nil:
					t.Errorf("Parse(%q) = %v, want a message: %q is optional", body, err, field)
				}
			})
		}
	}
	for typ := range wantPayload {
		if !seen[typ] {
			t.Errorf("no valid example of %s", typ)
		}
	}
}

// TestPayloadRoundTrip checks that what the node writes with json.Marshal it
// reads back as the same payload: money as strings, timestamps as sent.
func TestPayloadRoundTrip(t *testing.T) {
	for name, f := range validExamples(t) {
		t.Run(name, func(t *testing.T) {
			checkRoundTrip(t, f)
		})
	}
}

func checkRoundTrip(t *testing.T, f *Frame) {
	t.Helper()
	m, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse(%q) = %v", f.Body, err)
	}
	out, err := json.Marshal(m.Payload)
	if err != nil {
		t.Fatalf("json.Marshal(%#v) = %v", m.Payload, err)
	}
	g := *f
	g.Body = out
	again, err := Parse(&g)
	if err != nil {
		t.Fatalf("Parse(%q) = %v, want the payload written by json.Marshal back", out, err)
	}
	if out2, _ := json.Marshal(again.Payload); !bytes.Equal(out, out2) {
		t.Fatalf("json.Marshal after a round trip = %s, want %s", out2, out)
	}
}

func TestParseErrorsAreBadRequests(t *testing.T) {
	// Parse returns a nil error interface, not a nil *Error, on success.
	m, err := Parse(testFrame(TypeAck, ""))
	if err != nil || m == nil {
		t.Fatalf("Parse(ack) = %v, %v", m, err)
	}
	_, err = Parse(testFrame("nope", ""))
	if StatusOf(err) != StatusBadRequest {
		t.Fatalf("StatusOf(%v) = %v, want 400", err, StatusOf(err))
	}
}

// FuzzParse feeds Parse arbitrary bodies under every TYPE. Parse must never
// panic, must refuse only with a recoverable 400, and whatever it accepts
// must survive json.Marshal and Parse again.
func FuzzParse(f *testing.F) {
	types := Types()
	index := map[string]uint8{}
	for i, info := range types {
		index[info.Name] = uint8(i)
	}
	for _, ex := range validExamples(f) {
		f.Add(index[ex.Type()], ex.Body)
	}
	f.Add(index[TypeAck], []byte(nil))
	f.Add(index[TypeCreditTransfer], []byte(`{"amount": "1e999999", "amount": 1}`))
	f.Fuzz(func(t *testing.T, i uint8, body []byte) {
		info := types[int(i)%len(types)]
		fr := testFrame(info.Name, "")
		fr.Body = body
		m, err := Parse(fr)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != StatusBadRequest || e.Fatal {
				t.Fatalf("Parse(%q) = %v, want a recoverable 400", body, err)
			}
			return
		}
		if m.Info.Name != info.Name || reflect.TypeOf(m.Payload) != reflect.TypeOf(wantPayload[info.Name]) {
			t.Fatalf("Parse(%q) = %+v, want a %s", body, m, info.Name)
		}
		checkRoundTrip(t, fr)
	})
}
