package bridge

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/aglx/ledger/events"
	"github.com/aglx/ledger/projections"
)

// healthTimeout bounds the health check's question to JetStream.
const healthTimeout = 2 * time.Second

// HTTPHandler serves the node's HTTP API:
//
//	GET /healthz   200 when the log answers, else 503; with positions
//	GET /v1/stats  the stats projection and the edge's counters
func HTTPHandler(log *events.Log, runner *projections.Runner, stats *projections.Stats, srv *Server) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		last, err := log.LastSeq(ctx)
		body := map[string]any{"status": "ok", "log_last_seq": last, "applied_seq": runner.Applied()}
		select {
		case <-runner.Ready():
			body["projections"] = "ready"
		default:
			body["projections"] = "replaying"
		}
		status := http.StatusOK
		if err != nil {
			status = http.StatusServiceUnavailable
			body["status"] = "log unavailable"
			body["error"] = err.Error()
		}
		writeJSON(w, status, body)
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		var snap json.RawMessage
		var err error
		runner.View(func(uint64) { snap, err = stats.Snapshot() })
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"log": snap, "bridge": srv.Counters()})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
