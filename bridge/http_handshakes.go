package bridge

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/aglx/ledger/projections"
	"github.com/aglx/ledger/protocol"
)

// handshakeRoutes serves the handshake tracker: who owes whom an answer.
//
//	GET /v1/handshakes?agent=URI&state=S&kind=TYPE&after=SEQ&limit=N
//	GET /v1/handshakes/{seq}
//
// A list gives the totals, the number pending, and one page, oldest request
// first; its "next", when there is one, is the after= of the next page.
func (api API) handshakeRoutes(mux *http.ServeMux) {
	const without = "this node does not track handshakes"
	kept := api.Handshakes != nil
	mux.HandleFunc("GET /v1/handshakes", api.view(ifKept(kept, without, func(r *http.Request) (int, any) {
		q := r.URL.Query()
		after, limit, err := pageOf(r, projections.HandshakesPageMax)
		if err != nil {
			return http.StatusBadRequest, errBody(err.Error())
		}
		f := projections.HandshakeFilter{Agent: q.Get("agent"), State: q.Get("state"), Kind: q.Get("kind"), After: after, Limit: limit}
		if f.Agent != "" {
			u, err := protocol.ParseURI(f.Agent)
			if err != nil {
				return http.StatusBadRequest, errBody(fmt.Sprintf("agent=%q: %s", f.Agent, protocol.ReasonOf(err)))
			}
			f.Agent = u.String()
		}
		if f.Kind != "" && !projections.HandshakeKind(f.Kind) {
			return http.StatusBadRequest, errBody(fmt.Sprintf("kind=%q opens no handshake; the kinds are %v", f.Kind, projections.HandshakeKinds))
		}
		if err := f.Check(); err != nil {
			return http.StatusBadRequest, errBody(err.Error())
		}
		counts, pending := api.Handshakes.Counts()
		page := api.Handshakes.Page(f)
		out := map[string]any{"pending": pending, "counts": counts, "handshakes": page.Handshakes}
		if page.Next != 0 {
			out["next"] = page.Next
		}
		return http.StatusOK, out
	})))
	mux.HandleFunc("GET /v1/handshakes/{seq}", api.view(ifKept(kept, without, func(r *http.Request) (int, any) {
		seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
		if err != nil {
			return http.StatusBadRequest, errBody(fmt.Sprintf("%q is not a sequence number", r.PathValue("seq")))
		}
		h, ok := api.Handshakes.Handshake(seq)
		if !ok {
			return http.StatusNotFound, errBody(fmt.Sprintf("no handshake opened at seq %d is kept: the event there is no request, it was refused, or it ended long enough ago to be let go (see the log)", seq))
		}
		return http.StatusOK, h
	})))
}
