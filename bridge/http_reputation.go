package bridge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/aglx/ledger/reputation"
)

// reputationRoutes serves the reputation model (docs/REPUTATION.md).
//
//	GET /v1/reputation                  the totals: ratings applied, cut, refused, stale
//	GET /v1/reputation/{scheme}/{name}  an agent's score (0.5 if nobody rated it)
//
// A score is given as a number from 0 to 1 and, exactly, as the millionths
// the model holds ("score_millionths"), so that a reader can compare it
// with a zone's minimum without rounding.
func (api API) reputationRoutes(mux *http.ServeMux) {
	const without = "this node keeps no reputation model"
	kept := api.Reputation != nil
	mux.HandleFunc("GET /v1/reputation", api.view(ifKept(kept, without, func(r *http.Request) (int, any) {
		return http.StatusOK, map[string]any{"counts": api.Reputation.M.Counts(), "rated": api.Reputation.M.Rated()}
	})))
	mux.HandleFunc("GET /v1/reputation/{scheme}/{name}", api.view(ifKept(kept, without, func(r *http.Request) (int, any) {
		uri := uriOf(r)
		a, rated := api.Reputation.M.Agent(uri)
		return http.StatusOK, map[string]any{
			"agent":            uri,
			"score":            scoreNumber(a.Score),
			"score_millionths": a.Score,
			"rated":            rated,
			"ratings":          a.Ratings,
			"last_seq":         a.LastSeq,
		}
	})))
}

// scoreNumber writes millionths as the decimal number they are, with no
// float in between: 850000 is 0.85, 1000000 is 1.
func scoreNumber(millionths int64) json.Number {
	text := strconv.FormatInt(millionths/reputation.Scale, 10)
	if frac := millionths % reputation.Scale; frac != 0 {
		text += "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	}
	return json.Number(text)
}
