package main

import (
	"strings"
	"testing"
)

// TestQueryWhileReplayingSaysSo: during the replay after a start the node
// holds a read for bridge.SeqWaitMax and then answers 503, "the node is
// replaying its log". The CLI gave up at the same moment and printed a
// timeout that blamed the address (helper-88); it waits longer now, and
// prints the node's answer.
func TestQueryWhileReplayingSaysSo(t *testing.T) {
	n := startAuditNode(t) // folds not started: the node is replaying
	var out strings.Builder
	err := runBalance([]string{"--http", n.http, "agent://bob.local"}, &out)
	if err == nil || !strings.Contains(err.Error(), "replaying") || strings.Contains(err.Error(), "is a node serving its HTTP API") {
		t.Fatalf("aglx balance on a replaying node = %v; want the node's own answer, that it is replaying", err)
	}
}
