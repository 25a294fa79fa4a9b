package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// runHandshakes lists the requests agents made of each other and what
// became of them (GET /v1/handshakes): with --agent and --state pending,
// what an agent owes or is owed.
func runHandshakes(args []string, stdout io.Writer) error {
	fs, api, asJSON := queryFlags("handshakes")
	agent := fs.String("agent", "", "only handshakes this agent (a URI) is a party to")
	state := fs.String("state", "", "only handshakes in this state: pending, approved, rejected, cancelled or expired")
	kind := fs.String("kind", "", "only handshakes opened by this TYPE (task.assign, credit.request, ...)")
	after := fs.Uint64("after", 0, "only handshakes opened after this seq (the next page)")
	limit := fs.Int("limit", 0, "at most this many (0: the largest page, 1,000)")
	if _, err := parseQuery(fs, args, 0); err != nil {
		return err
	}
	if *limit < 0 {
		return fmt.Errorf("--limit %d: want 1 or more, or 0 for the largest page", *limit)
	}
	q := queryOf(map[string]string{"agent": *agent, "state": *state, "kind": *kind})
	if *after > 0 {
		q.Set("after", strconv.FormatUint(*after, 10))
	}
	if *limit > 0 {
		q.Set("limit", strconv.Itoa(*limit))
	}
	var v struct {
		Pending    int              `json:"pending"`
		Counts     map[string]any   `json:"counts"`
		Handshakes []map[string]any `json:"handshakes"`
		Next       uint64           `json:"next,omitempty"`
	}
	if err := getJSON(*api, "/v1/handshakes?"+q.Encode(), &v); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, v)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "seq\tkind\tkey\trequester\tresponder\tstate\topened\tdeadline\tanswer\tdetail")
	for _, h := range v.Handshakes {
		fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\t%v\t%v\t%v\t%v\n", h["seq"], h["kind"], orDash(h["key"]), h["requester"], h["responder"],
			h["state"], h["opened"], h["deadline"], orDash(h["answer"]), orDash(h["detail"]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d pending on the node\n", v.Pending)
	if v.Next != 0 {
		fmt.Fprintf(stdout, "(the page stopped there: there may be more; add --after %d)\n", v.Next)
	}
	return nil
}

// orDash prints an absent member as "-".
func orDash(v any) any {
	if v == nil || v == "" {
		return "-"
	}
	return v
}
