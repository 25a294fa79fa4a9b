package bridge

import (
	"fmt"
	"maps"
	"net/http"
	"runtime/metrics"
	"slices"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/protocol"
)

// metrics writes the node's counters in the Prometheus text format: a
// handful of counters and gauges, which do not need a client library.
func (api API) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	put := func(name, kind, help string, v any) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %v\n", name, help, name, kind, name, v)
	}
	c := api.Edge.Counters()
	put("aglx_connections_open", "gauge", "Open AGLX TCP and TLS connections.", c.ConnectionsOpen)
	put("aglx_connections_total", "counter", "AGLX connections accepted.", c.ConnectionsTotal)
	put("aglx_connections_refused_total", "counter", "Connections refused at the connection limit.", c.ConnectionsShed)
	put("aglx_connections_idle_closed_total", "counter", "Connections closed for sending no complete frame within the idle timeout.", c.ConnectionsIdle)
	put("aglx_frames_appended_total", "counter", "Frames stored as events and answered (a fold may have refused one: then it counts as refused too).", c.FramesAppended)
	put("aglx_frames_duplicate_total", "counter", "Resent frames (same ID within the duplicate window) answered from the first copy; nothing stored.", c.FramesDuplicate)
	put("aglx_frames_refused_total", "counter", "Frames refused, at the edge or by a fold.", c.FramesRefused)
	fmt.Fprintf(w, "# HELP aglx_frames_refused_by_status_total Frames refused, by the status of the refusal (other: one not in PROTOCOL.md's list).\n# TYPE aglx_frames_refused_by_status_total counter\n")
	for _, st := range slices.Sorted(maps.Keys(c.FramesRefusedBy)) {
		fmt.Fprintf(w, "aglx_frames_refused_by_status_total{status=%q} %d\n", st, c.FramesRefusedBy[st])
	}
	put("aglx_udp_appended_total", "counter", "Announce datagrams appended.", c.UDPAppended)
	put("aglx_udp_refused_total", "counter", "Datagrams refused.", c.UDPRefused)
	put("aglx_udp_limited_total", "counter", "Datagrams dropped unread over the UDP rate bounds (per host and in all).", c.UDPLimited)
	ed := protocol.Ed25519Counters()
	put("aglx_ed25519_lone_checks_total", "counter", "Ed25519 signatures the node chose to check one by one.", ed.Lone)
	put("aglx_ed25519_batches_total", "counter", "Batches of Ed25519 signatures handed to the batch verifier.", ed.Batches)
	put("aglx_ed25519_batched_checks_total", "counter", "Ed25519 signatures in those batches.", ed.Batched)
	put("aglx_ed25519_failed_batches_total", "counter", "Batches with at least one signature that failed under the key it was checked with (forged or broken, or checked ahead of the fold with a key since rotated); their signatures were then checked one by one.", ed.FailedBatches)
	// The state of the node, for alerts that should not wait for a
	// commit to fail: /healthz's verdict, without its call to the stream.
	healthy := 1
	if api.Log.Healthy() != nil { // the store's state included
		healthy = 0
	}
	put("aglx_healthy", "gauge", "1 while the log takes appends (as /healthz judges, without asking the stream), else 0.", healthy)
	if api.Certs != nil {
		// An operator's certificate expires unless renewed on disk; the
		// node's own is remade in time. Alert some weeks ahead.
		put("aglx_tls_cert_not_after_timestamp_seconds", "gauge", "When the TLS certificate served ends, in Unix seconds.", api.Certs.NotAfter().Unix())
	}
	// The process's memory, as the Go runtime counts it: the heap the
	// node uses now, and all it holds from the system (RELIABILITY.md
	// sizes it; GOMEMLIMIT bounds it).
	var ms [2]metrics.Sample
	ms[0].Name, ms[1].Name = "/memory/classes/heap/objects:bytes", "/memory/classes/total:bytes"
	metrics.Read(ms[:])
	if ms[0].Value.Kind() == metrics.KindUint64 && ms[1].Value.Kind() == metrics.KindUint64 {
		put("aglx_heap_objects_bytes", "gauge", "Memory of the live and not yet swept objects of the Go heap.", ms[0].Value.Uint64())
		put("aglx_memory_total_bytes", "gauge", "All memory the Go runtime holds from the system.", ms[1].Value.Uint64())
	}
	if len(api.Federations) > 0 {
		var failures, failing int64
		for _, f := range api.Federations {
			failures += f.Failures()
			if f.Failing() {
				failing++
			}
		}
		put("aglx_federation_peers", "gauge", "Peer registries this node pushes its changes to (--sync-to).", len(api.Federations))
		put("aglx_federation_peers_failing", "gauge", "Of those, the peers whose last push failed (the log says why, as \"registry sync: the push failed\").", failing)
		put("aglx_federation_push_failures_total", "counter", "Pushes to peer registries that failed, all peers together.", failures)
	}
	if api.StoreUsage != nil {
		if used, limit := api.StoreUsage(); limit > 0 {
			put("aglx_store_used_bytes", "gauge", "What the embedded JetStream's streams hold.", used)
			put("aglx_store_limit_bytes", "gauge", "The most JetStream lets its streams hold, set at each start to three quarters of the disk's free space plus of what they hold; at it every frame is refused (OPERATIONS.md).", limit)
		}
	}
	if api.StoreFree != nil {
		if free, err := api.StoreFree(); err == nil {
			put("aglx_store_free_bytes", "gauge", "Free space on the file system of the embedded JetStream store; a restart needs about 1.4 GiB (OPERATIONS.md).", free)
		}
	}
	if api.Runner != nil {
		ready := 0
		if api.caughtUp() {
			ready = 1
		}
		put("aglx_projections_ready", "gauge", "1 once the projections have caught up with the log after a start (/readyz), else 0.", ready)
		put("aglx_applied_seq", "gauge", "The last event the projections applied.", api.Runner.Applied())
	}
	if api.SavedState != nil {
		seq, failures := api.SavedState()
		put("aglx_fold_state_saved_seq", "gauge", "The event the folds' saved state stands at (loaded at start, or saved since): a start after a crash folds the events after it.", seq)
		put("aglx_fold_state_save_failures_total", "counter", "Background saves of the folds' state that failed (the log says why).", failures)
	}
	if api.Handshakes != nil {
		put("aglx_handshakes_pending", "gauge", "Requests between agents waiting for their answer (GET /v1/handshakes?state=pending).", api.Handshakes.Pending())
	}
	nc := events.ReadClientCounters()
	put("aglx_nats_client_errors_total", "counter", "Asynchronous errors the node's NATS connections reported, slow consumers included (the node's log has each).", nc.AsyncErrors)
	put("aglx_nats_slow_consumers_total", "counter", "Times a subscription of the node fell behind and its NATS client dropped messages for it (a read's consumer starts again where it lacks one: nothing lost).", nc.SlowConsumers)
	put("aglx_nats_disconnects_total", "counter", "Times a NATS connection of the node was lost (the log says which, and what waits until it is back).", nc.Disconnects)
	put("aglx_published_seq", "gauge", "The last event known to be in the event stream.", api.Log.Published())
	cs := api.Log.CommitStats()
	put("aglx_wal_commits_total", "counter", "Group commits written to the write-ahead stream.", cs.Commits)
	put("aglx_wal_commit_failures_total", "counter", "Group commits the write-ahead stream did not take.", cs.Failures)
	put("aglx_wal_committed_events_total", "counter", "Events in those commits.", cs.Events)
	put("aglx_wal_committed_bytes_total", "counter", "Encoded bytes of those commits.", cs.Bytes)
	cs.Latency.WritePrometheus(w, "aglx_wal_commit_duration_seconds", "Latency of group commits to the write-ahead stream (one fsync each).")
	api.Edge.AckLatency().WritePrometheus(w, "aglx_ack_duration_seconds", "From reading a frame to handing its reply to the socket.")
	if api.Relay != nil {
		rc := api.Relay.Counters()
		put("aglx_relay_delivered_total", "counter", "Messages delivered to their addressees.", rc.Delivered)
		put("aglx_relay_undeliverable_total", "counter", "Messages the relay will not deliver (they stay in the log): no reachable registered address, an address outside the relay networks, a verdict no longer known, or every attempt failed.", rc.Undeliverable)
		put("aglx_relay_failed_attempts_total", "counter", "Delivery attempts that failed and will be retried.", rc.Failed)
		put("aglx_relay_cursor_seq", "gauge", "Sequence up to which every agent-to-agent message is settled.", rc.Cursor)
		put("aglx_relay_retrying", "gauge", "Messages waiting for another delivery attempt.", rc.Retrying)
		put("aglx_relay_lanes", "gauge", "Addresses the relay is delivering to right now (at most 64).", rc.Lanes)
		put("aglx_relay_waiting_for_lane", "gauge", "Messages that found no relay lane free and wait for one.", rc.WaitingForLane)
		put("aglx_relay_unexpected_replies_total", "counter", "Addressees' replies that were neither ack nor error: answers sent back on the relay's connection, which are dropped.", rc.UnexpectedReplies)
	}
}
