package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
	"github.com/nats-io/nats.go"
)

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runTail(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("tail")
	url := fs.String("nats", "nats://"+bridge.DefaultNATSAddr, "the node's NATS address (aglxd --nats-listen)")
	stream := fs.String("stream", events.StreamNameDefault, "event log stream name")
	seq := fs.Uint64("seq", 0, "start at this stream sequence")
	since := fs.String("since", "", "start at this time: RFC 3339 (2025-10-29T18:00:00Z) or a duration ago (10m)")
	var types multiFlag
	fs.Var(&types, "type", "only this TYPE (credit.transfer) or group (credit); repeatable")
	from := fs.String("from", "", "only messages from this agent URI")
	to := fs.String("to", "", "only messages to this agent URI")
	agent := fs.String("agent", "", "only messages from or to this agent URI")
	asJSON := fs.Bool("json", false, "print one JSON object per line instead of frames")
	noFollow := fs.Bool("no-follow", false, "stop at the end of the log instead of waiting for more")
	// `aglx tail X --type credit` followed every TYPE: flags after an
	// argument were ignored. It takes none, and reads every flag.
	if _, err := parseQuery(fs, args, 0); err != nil {
		return err
	}
	opts := events.ReadOptions{StartSeq: *seq, Follow: !*noFollow}
	var err error
	if *since != "" && *seq != 0 {
		// The log starts at one of them; taking one silently would show
		// another stretch than the one asked for.
		return fmt.Errorf("--seq and --since both say where to start: give one")
	}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			return err
		}
		opts.StartTime = t
	}
	if opts.Subjects, err = filters(types, *from, *to, *agent); err != nil {
		return err
	}

	// A node that stops leaves the reader waiting for it: say so, rather
	// than hang without a word.
	reconnected := make(chan struct{}, 1)
	nc, err := nats.Connect(*url, nats.Name("aglx tail"),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if c.IsClosed() { // our own Close at the end, not a loss
				return
			}
			fmt.Fprintf(os.Stderr, "aglx tail: lost the connection to %s (%v); trying again\n", *url, err)
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			fmt.Fprintf(os.Stderr, "aglx tail: connected again to %s\n", *url)
			select {
			case reconnected <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		return fmt.Errorf("connect %s: %w (is a node serving NATS there? --nats names it; aglxd's --nats-listen)", *url, err)
	}
	defer nc.Close()
	lg, err := events.Attach(ctx, nc, *stream)
	if err != nil {
		return err
	}
	created, err := lg.Created(ctx)
	if err != nil {
		return err
	}
	same := &sameLog{nc: nc, lg: lg, url: *url, created: created}
	readCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go same.watch(readCtx, reconnected, stop)
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false) // a body's "<" as it was sent, not "\u003c"
	err = lg.Read(readCtx, opts, func(e *events.Envelope) error {
		if err := same.check(readCtx); err != nil {
			return err
		}
		if e.Foreign != nil {
			fmt.Fprintf(os.Stderr, "# seq %d: not an AGLX event (%v); skipped\n", e.Seq, e.Foreign)
			return nil
		}
		if *asJSON {
			return enc.Encode(jsonEvent(e))
		}
		// The frame as stored, not as the node would send it: Encode
		// writes a CONTENT-LENGTH of its own, and the log's reader wants
		// the sender's (a wrong one included) or none.
		out := fmt.Appendf(nil, "# seq %d  event %s  %s via %s from %s\n", e.Seq, e.ID, e.ReceivedAtText(), e.Transport, e.Peer)
		out = protocol.AppendFrameAsGiven(out, e.Frame())
		_, err := stdout.Write(append(out, '\n'))
		return err
	})
	if errors.Is(err, errAnotherLog) {
		return err
	}
	if cause := context.Cause(readCtx); errors.Is(cause, errAnotherLog) {
		return cause
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// filters turns the flags into subject filters: one per TYPE, and for
// --agent alone one for each direction. --agent with --to or --from is
// the one direction they leave. URIs are written canonically first, as
// the subjects hold them: agent://Worker05.local matched nothing.
func filters(types []string, from, to, agent string) ([]string, error) {
	for _, u := range []*string{&from, &to, &agent} {
		if *u == "" {
			continue
		}
		p, err := protocol.ParseURI(*u)
		if err != nil {
			return nil, fmt.Errorf("%s, such as agent://worker05.local", protocol.ReasonOf(err))
		}
		*u = p.String()
	}
	if agent != "" && from != "" && to != "" {
		return nil, errors.New("--agent with both --from and --to: give two of them")
	}
	for _, t := range types {
		if err := knownTypeOrGroup(t); err != nil {
			return nil, err
		}
	}
	types = withoutOverlap(types)
	if len(types) == 0 {
		types = []string{""}
	}
	var out []string
	for _, t := range types {
		switch {
		case agent != "" && to != "":
			out = append(out, events.Filter(t, agent, to))
		case agent != "" && from != "":
			out = append(out, events.Filter(t, from, agent))
		case agent != "":
			out = append(out, events.Filter(t, agent, ""), events.Filter(t, "", agent))
		default:
			out = append(out, events.Filter(t, from, to))
		}
	}
	if len(out) == 1 && out[0] == events.Filter("", "", "") {
		return nil, nil
	}
	return out, nil
}

// withoutOverlap drops a --type given twice, and a TYPE whose group is
// given too: JetStream refuses a consumer whose filters overlap, so
// `--type credit --type credit.transfer` failed with the server's words.
func withoutOverlap(types []string) []string {
	seen := map[string]bool{}
	for _, t := range types {
		seen[t] = true
	}
	var out []string
	for _, t := range types {
		group, _, isType := strings.Cut(t, ".")
		if !seen[t] || (isType && seen[group]) {
			continue
		}
		seen[t] = false // once
		out = append(out, t)
	}
	return out
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want RFC 3339 or a duration", s)
	}
	return t, nil
}

// jsonLine is one event as `aglx tail --json` prints it.
type jsonLine struct {
	Seq        uint64          `json:"seq"`
	EventID    string          `json:"event_id"`
	Type       string          `json:"type"`
	From       string          `json:"from"`
	To         string          `json:"to,omitempty"`
	Transport  string          `json:"transport"`
	Declared   string          `json:"declared,omitempty"`
	Peer       string          `json:"peer,omitempty"`
	DedupID    string          `json:"dedup_id,omitempty"`
	NoBody     bool            `json:"no_body,omitempty"`
	ReceivedAt string          `json:"received_at"` // as stored: fixed width, so it sorts as time does
	Headers    [][2]string     `json:"headers"`
	Body       json.RawMessage `json:"body,omitempty"` // a JSON body, compacted (the values as sent)
	// BodyBase64 is a body that is not UTF-8 JSON, byte for byte: it was
	// left out until 2026-12-02, and such bodies are events too
	// (helper-103).
	BodyBase64 string `json:"body_base64,omitempty"`
}

func jsonEvent(e *events.Envelope) jsonLine {
	l := jsonLine{Seq: e.Seq, EventID: e.ID, Type: e.Type, From: e.From, To: e.To, Transport: e.Transport, Declared: e.Declared,
		Peer: e.Peer, NoBody: e.Body == nil, ReceivedAt: e.ReceivedAtText()}
	if e.MsgID != e.ID {
		l.DedupID = e.MsgID
	}
	for _, h := range e.Headers {
		l.Headers = append(l.Headers, [2]string{h.Name, h.Value})
	}
	switch {
	case json.Valid(e.Body) && utf8.Valid(e.Body):
		// json.Valid takes bytes that are not UTF-8 inside strings;
		// printed as they are, the line was not UTF-8, and strict
		// readers failed on it (helper-105). Such bodies, stored before
		// the edge refused them, come in base64.
		l.Body = e.Body
	case len(e.Body) > 0:
		l.BodyBase64 = base64.StdEncoding.EncodeToString(e.Body)
	}
	return l
}

// knownTypeOrGroup refuses a --type that is neither a TYPE nor a group of
// TYPEs: it would match nothing, and a follow would wait for ever.
func knownTypeOrGroup(t string) error {
	if _, ok := protocol.Lookup(t); ok {
		return nil
	}
	for _, info := range protocol.Types() {
		if strings.HasPrefix(info.Name, t+".") {
			return nil
		}
	}
	if near, ok := protocol.NearestType(t); ok {
		return fmt.Errorf("--type %q is no TYPE or group of TYPEs; did you mean %q?", t, near)
	}
	return fmt.Errorf("--type %q is no TYPE or group of TYPEs (such as credit.transfer or credit)", t)
}
