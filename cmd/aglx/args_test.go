package main

import (
	"context"
	"net"
	"strings"
	"testing"
)

// TestFlagsAfterAStrayArgumentAreRead: audit, tail and bench parsed their
// flags up to the first argument and ignored it and every flag after it,
// so `aglx audit X --key-id K` audited without the pin, and said OK
// whatever key the node named, and `aglx tail X --type credit` followed
// every TYPE. They take no argument: one is refused, and flags after it
// are read.
func TestFlagsAfterAStrayArgumentAreRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nobody listens there: a command that goes on fails on it
	ctx := context.Background()
	var out strings.Builder
	for name, run := range map[string]func() error{
		"audit": func() error {
			return runAudit(ctx, []string{"--http", "http://" + dead, "--wait", "0", "node.example", "--key-id", "sha256:0000"}, &out)
		},
		"tail": func() error {
			return runTail(ctx, []string{"--nats", "nats://" + dead, "credit", "--type", "credit"}, &out)
		},
		// --runs 0 makes bench stop before it measures anything, if it
		// reads on past the argument.
		"bench": func() error { return runBench(ctx, []string{"--runs", "0", "extra", "--only", "raw"}, &out) },
	} {
		err := run()
		if err == nil || !strings.Contains(err.Error(), "want 0 argument(s), got 1") {
			t.Errorf("aglx %s with a stray argument before flags = %v; want the argument refused", name, err)
		}
	}
}
