package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/ledger"
	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// httpTimeout bounds one question to the node's HTTP API: longer than the
// node lets a read wait for its replay or a position (bridge.SeqWaitMax),
// so that the CLI prints the node's answer ("replaying, ask again")
// instead of giving up at the same moment and blaming the address
// (helper-88).
const httpTimeout = bridge.SeqWaitMax + 10*time.Second

// getJSON asks the node's HTTP API and decodes the answer into v.
func getJSON(base, path string, v any) error {
	return getJSONWithin(context.Background(), base, path, v, httpTimeout)
}

// statusError is an answer of the node's HTTP API other than 200, with
// the reason it gave.
type statusError struct {
	code        int
	status, msg string
	retryAfter  time.Duration // its Retry-After in seconds; 0 if none
}

func (e *statusError) Error() string { return e.status + ": " + e.msg }

// apiURL is path on the node's HTTP API at base, which may leave out the
// scheme (--http 127.0.0.1:2595 means the same).
func apiURL(base, path string) string {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return strings.TrimRight(base, "/") + path
}

// answerBytesMax bounds what the CLI reads of an HTTP answer: a page of
// entries or agents is far smaller; a ledger digest is a few hundred bytes.
const answerBytesMax = 64 << 20 // bytes

// getJSONWithin is getJSON with its own bound, for answers that take
// long: the ledger digest hashes the whole ledger, seconds on a large one.
func getJSONWithin(ctx context.Context, base, path string, v any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL(base, path), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return err // stopped (Ctrl-C): no hint about the address
		}
		// Nothing there, most likely: say which flag names the node.
		return fmt.Errorf("%w (is a node serving its HTTP API at %s? --http names it)", err, base)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, answerBytesMax))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return &statusError{code: resp.StatusCode, status: resp.Status, msg: e.Error, retryAfter: retryAfter(resp.Header)}
	}
	// Numbers decoded into an any stay their text: as float64 a seq of
	// 1,234,567 would print as 1.234567e+06.
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// retryAfterMax bounds a Retry-After the CLI takes: the node's are
// seconds to minutes, and a larger one is past any --wait anyway.
const retryAfterMax = 24 * time.Hour

// retryAfter reads an answer's Retry-After in seconds, the form the node
// sends; a date, a negative or unreadable value counts as none.
func retryAfter(h http.Header) time.Duration {
	secs, err := strconv.ParseUint(strings.TrimSpace(h.Get("Retry-After")), 10, 32)
	if err != nil {
		return 0
	}
	return min(time.Duration(secs)*time.Second, retryAfterMax)
}

// uriPath writes an AGLX URI scheme://name as the path scheme/name.
func uriPath(uri string) (string, error) {
	u, err := protocol.ParseURI(uri)
	if err != nil {
		// The reason names the input and the form expected already.
		return "", fmt.Errorf("%s, such as agent://worker05.local", protocol.ReasonOf(err))
	}
	// Canonical, as the node keys its state: agent://Worker05.local is
	// agent://worker05.local.
	scheme, name, _ := strings.Cut(u.String(), "://")
	return url.PathEscape(scheme) + "/" + url.PathEscape(name), nil
}

// queryFlags makes the flag set of the query named, with the flags every
// query takes: --http and --json.
func queryFlags(name string) (*flag.FlagSet, *string, *bool) {
	fs := newFlagSet(name)
	api := fs.String("http", "http://"+bridge.DefaultHTTPAddr, "the node's HTTP API")
	return fs, api, fs.Bool("json", false, "print JSON")
}

// parseQuery parses a query's flags, before or after its arguments, and
// checks the count of these, which it returns. Its callers go on when the
// error is nil, so after -h it returns exit status 0.
func parseQuery(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != want {
		fs.Usage()
		return nil, fmt.Errorf("%s: want %d argument(s), got %d", fs.Name(), want, len(pos))
	}
	return pos, nil
}

// parseInterleaved parses flags before, between and after the arguments,
// and returns the arguments: `aglx send FILE --timeout 5s` took
// "--timeout" for a file (helper-81). After -h it returns exit status 0.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if stop, err := parseFlags(fs, args); stop {
			if err == nil {
				return nil, exitCode(0)
			}
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		if used := len(args) - fs.NArg(); used > 0 && args[used-1] == "--" {
			// After "--" everything is an argument, even "-a.aglx".
			return append(pos, fs.Args()...), nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// queryOf is a query string of the values given, leaving out empty ones.
func queryOf(values map[string]string) url.Values {
	q := url.Values{}
	for k, v := range values {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// runBalance prints an account's figures.
func runBalance(args []string, stdout io.Writer) error {
	fs, api, asJSON := queryFlags("balance")
	pos, err := parseQuery(fs, args, 1)
	if err != nil {
		return err
	}
	p, err := uriPath(pos[0])
	if err != nil {
		return err
	}
	var v map[string]any
	if err := getJSON(*api, "/v1/accounts/"+p, &v); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, v)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	printFields(tw, v, "uri", "balance", "available", "pending", "earned_total", "spent_total", "updated", "seq")
	return tw.Flush()
}

// printFields prints the members of v named, one "name value" line each,
// leaving out those v does not have; a list is printed as its items
// joined by commas, an object as its JSON.
func printFields(w io.Writer, v map[string]any, names ...string) {
	for _, k := range names {
		x, ok := v[k]
		if !ok {
			continue
		}
		switch x := x.(type) {
		case []any:
			items := make([]string, len(x))
			for i, it := range x {
				items[i] = fmt.Sprint(it)
			}
			fmt.Fprintf(w, "%s\t%s\n", k, strings.Join(items, ", "))
		case map[string]any:
			b, _ := json.Marshal(x) // decoded from JSON: it encodes
			fmt.Fprintf(w, "%s\t%s\n", k, b)
		default:
			fmt.Fprintf(w, "%s\t%v\n", k, x)
		}
	}
}

// runHistory prints an account's postings with running balances.
func runHistory(args []string, stdout io.Writer) error {
	fs, api, asJSON := queryFlags("history")
	after := fs.Uint64("after", 0, "only postings after this sequence")
	limit := fs.Int("limit", 100, "at most this many postings")
	pos, err := parseQuery(fs, args, 1)
	if err != nil {
		return err
	}
	p, err := uriPath(pos[0])
	if err != nil {
		return err
	}
	u, _ := protocol.ParseURI(pos[0]) // uriPath checked it
	uri := u.String()                 // canonical, as the entries name it
	var v struct {
		Entries []map[string]any `json:"entries"`
	}
	if *limit < 1 {
		return fmt.Errorf("--limit %d: a page holds at least 1 posting", *limit)
	}
	if err := getJSON(*api, fmt.Sprintf("/v1/accounts/%s/entries?after=%d&limit=%d", p, *after, *limit), &v); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, v)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "seq\ttime\tkind\ttransaction\tcounterparty\tamount\tbalance\t")
	for _, e := range v.Entries {
		amount, balance, other := fmt.Sprint(e["amount"]), fmt.Sprint(e["to_balance"]), fmt.Sprint(e["from"])
		if e["from"] == uri {
			amount, balance, other = "-"+amount, fmt.Sprint(e["from_balance"]), fmt.Sprint(e["to"])
		}
		fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%s\t%s\t\n", e["seq"], e["time"], e["kind"], e["transaction_id"], other, amount, balance)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The node gives at most ledger.EntriesLimitMax a page, whatever was
	// asked: a --limit above it cut the list off with no hint (helper-69).
	if n := len(v.Entries); n > 0 && n >= min(*limit, ledger.EntriesLimitMax) {
		fmt.Fprintf(stdout, "(a full page: there may be more; add --after %v)\n", v.Entries[n-1]["seq"])
	}
	return nil
}

// runAgents lists the registry.
func runAgents(args []string, stdout io.Writer) error {
	fs, api, asJSON := queryFlags("agents")
	status := fs.String("status", "", "only agents with this status, ignoring case: EXPIRED, READY, or an agent's own word (IDLE, BUSY, ...)")
	capability := fs.String("capability", "", "only agents with this capability")
	zone := fs.String("zone", "", "only members of this zone")
	after := fs.String("after", "", "only agents whose URI sorts after this one (the next page)")
	if _, err := parseQuery(fs, args, 0); err != nil {
		return err
	}
	q := queryOf(map[string]string{"status": *status, "capability": *capability, "zone": *zone, "after": *after})
	var v struct {
		Agents []map[string]any `json:"agents"`
		// Statuses are those in use, when no agent has the one asked.
		Statuses *[]string `json:"statuses,omitempty"`
		// Next is where to go on when the node stopped looking before the
		// page filled (projections.AgentsScanMax).
		Next string `json:"next,omitempty"`
	}
	if err := getJSON(*api, "/v1/agents?"+q.Encode(), &v); err != nil {
		return err
	}
	if v.Statuses != nil {
		// An empty table said nothing of a mistyped status.
		return unknownStatus(*status, *v.Statuses)
	}
	if *asJSON {
		return printJSON(stdout, v)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "agent\tagent_id\tstatus\tlast_seen\tcapabilities")
	for _, a := range v.Agents {
		fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\n", a["agent_uri"], a["agent_id"], a["status"], a["last_seen"], orDash(a["capabilities"]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Next != "" {
		fmt.Fprintf(stdout, "(the node looked at %d agents for this page and stopped; there may be more: add --after %s)\n", projections.AgentsScanMax, v.Next)
	} else if n := len(v.Agents); n >= projections.AgentsPageMax {
		fmt.Fprintf(stdout, "(a full page: there may be more; add --after %v)\n", v.Agents[n-1]["agent_uri"])
	}
	return nil
}

// unknownStatus is the error for a status no agent has, naming those the
// agents have as the node listed them.
func unknownStatus(status string, held []string) error {
	if len(held) == 0 {
		return fmt.Errorf("--status %q: no agent has that status; the registry holds no agent", status)
	}
	most := ""
	if len(held) == projections.StatusesShownMax {
		most = fmt.Sprintf(" (the %d most held)", len(held))
	}
	return fmt.Errorf("--status %q: no agent has that status; the agents' statuses%s are %s (matched ignoring case)",
		status, most, strings.Join(held, ", "))
}

// runAgent shows one registry entry in full: its fields, then its keys and
// its status history as tables; --json prints the node's answer as it is.
func runAgent(args []string, stdout io.Writer) error {
	fs, api, asJSON := queryFlags("agent")
	pos, err := parseQuery(fs, args, 1)
	if err != nil {
		return err
	}
	p, err := uriPath(pos[0])
	if err != nil {
		return err
	}
	var v map[string]any
	if err := getJSON(*api, "/v1/agents/"+p, &v); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, v)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	printFields(tw, v, "agent_uri", "registered", "agent_id", "name", "type", "status", "capabilities", "address", "port", "ttl",
		"last_seen", "expires", "uptime", "source", "via", "registered_at", "zones", "reputation", "hint", "sighting", "mentor")
	if err := tw.Flush(); err != nil {
		return err
	}
	keys, _ := v["keys"].([]any)
	if err := printTable(stdout, "keys", keys, "key_id", "current", "bound_by", "bound_at", "retired_at", "verified_until"); err != nil {
		return err
	}
	history, _ := v["history"].([]any)
	return printTable(stdout, "history", history, "at", "status", "cause", "seq")
}

// printTable prints rows, objects of a list in an answer, under a blank
// line and the title, with the columns named ("-" for a member a row does
// not have). It prints nothing for no rows.
func printTable(w io.Writer, title string, rows []any, columns ...string) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	for _, r := range rows {
		m, _ := r.(map[string]any)
		cells := make([]string, len(columns))
		for i, c := range columns {
			cells[i] = fmt.Sprint(orDash(m[c]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
