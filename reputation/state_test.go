package reputation

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/aglx/ledger/ledger/statecodec"
	"github.com/aglx/ledger/ledger/statecodec/statetest"
)

// rating is one call of Rate.
type rating struct {
	rater, ratee string
	delta, stamp int64
	seq          uint64
}

// ratings is a run of n ratings among a few agents, from a fixed seed: some
// stale (a stamp not after the pair's last), some from a pair whose share
// is spent, some cut short, so that every count moves.
func ratings(seed uint64, n int) []rating {
	rng := rand.New(rand.NewPCG(seed, 7))
	agents := []string{"agent://a", "agent://b", "agent://c", "agent://d", "agent://e"}
	out := make([]rating, 0, n)
	for i := range n {
		stamp := int64(i) * 1000
		if rng.IntN(6) == 0 {
			stamp -= 5000 // behind the pair's last: stale
		}
		out = append(out, rating{
			rater: agents[rng.IntN(len(agents))], ratee: agents[rng.IntN(len(agents))],
			delta: int64(rng.IntN(2*Scale+1)) - Scale, stamp: stamp, seq: uint64(i + 1),
		})
	}
	return out
}

func rateAll(m *Model, rs []rating) {
	for _, x := range rs {
		m.Rate(x.rater, x.ratee, x.delta, x.stamp, x.seq)
	}
}

func saved(t testing.TB, m *Model) []byte {
	t.Helper()
	var w statecodec.Writer
	if err := m.SaveState(&w); err != nil {
		t.Fatalf("SaveState: %v", err)
	}
	return w.Bytes()
}

func loaded(t testing.TB, b []byte) *Model {
	t.Helper()
	m := New()
	r := statecodec.NewReader(b)
	if err := m.LoadState(r); err != nil {
		t.Fatalf("LoadState: %v", err)
	}
	if err := r.Done(); err != nil {
		t.Fatalf("LoadState left bytes: %v", err)
	}
	return m
}

// TestModelStateRoundTrip: a model loaded from a saved one is the same
// model, field for field, saves to the same bytes, and rates on as the
// saved one does.
func TestModelStateRoundTrip(t *testing.T) {
	tests := []struct {
		name        string
		before, aft int
	}{
		{name: "empty", before: 0, aft: 50},
		{name: "a few ratings", before: 10, aft: 50},
		{name: "shares spent and copies refused", before: 400, aft: 200},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := ratings(uint64(i), tc.before+tc.aft)
			m := New()
			rateAll(m, rs[:tc.before])
			if tc.before >= 400 {
				if c := m.Counts(); c.Capped == 0 || c.Refused == 0 || c.Stale == 0 || c.Applied == 0 {
					t.Fatalf("the ratings do not move every count: %+v", c)
				}
			}
			b := saved(t, m)
			if again := saved(t, m); !bytes.Equal(b, again) {
				t.Fatal("the same model saved twice gives different bytes")
			}
			got := loaded(t, b)
			if d := statetest.Diff(m, got); d != "" {
				t.Fatalf("the loaded model differs (-saved +loaded):\n%s", d)
			}
			if again := saved(t, got); !bytes.Equal(b, again) {
				t.Fatal("the loaded model saves to other bytes than it was loaded from")
			}
			rateAll(m, rs[tc.before:])
			rateAll(got, rs[tc.before:])
			if d := statetest.Diff(m, got); d != "" {
				t.Fatalf("after the same ratings the models differ (-saved +loaded):\n%s", d)
			}
			want, _ := m.Snapshot()
			have, _ := got.Snapshot()
			if !bytes.Equal(want, have) {
				t.Fatalf("snapshots differ:\n%s\n%s", want, have)
			}
		})
	}
}

// TestModelLoadStateRefuses: states Rate could not have made are refused.
func TestModelLoadStateRefuses(t *testing.T) {
	type agent struct {
		uri     string
		score   int64
		ratings uint64
	}
	type given struct {
		rater, ratee string
		moved        int64
	}
	enc := func(agents []agent, pairs []given) []byte {
		var w statecodec.Writer
		w.Len(len(agents))
		for _, a := range agents {
			w.String(a.uri)
			w.Int(a.score)
			w.Uint(a.ratings)
			w.Uint(1)
		}
		w.Len(len(pairs))
		for _, p := range pairs {
			w.String(p.rater)
			w.String(p.ratee)
			w.Int(p.moved)
			w.Int(1)
		}
		for range 4 {
			w.Uint(0)
		}
		return w.Bytes()
	}
	tests := []struct {
		name   string
		agents []agent
		pairs  []given
		ok     bool
	}{
		{name: "valid", agents: []agent{{"a", 1, 1}, {"b", Scale, 2}}, pairs: []given{{"a", "b", 5}, {"b", "a", PairMax}}, ok: true},
		{name: "agents out of order", agents: []agent{{"b", 1, 1}, {"a", 1, 1}}},
		{name: "an agent twice", agents: []agent{{"a", 1, 1}, {"a", 1, 1}}},
		{name: "an empty uri", agents: []agent{{"", 1, 1}}},
		{name: "a score below 0", agents: []agent{{"a", -1, 1}}},
		{name: "a score above Scale", agents: []agent{{"a", Scale + 1, 1}}},
		{name: "a score and no rating", agents: []agent{{"a", 1, 0}}},
		{name: "pairs out of order", pairs: []given{{"b", "a", 1}, {"a", "b", 1}}},
		{name: "a pair twice", pairs: []given{{"a", "b", 1}, {"a", "b", 1}}},
		{name: "an agent rating itself", pairs: []given{{"a", "a", 1}}},
		{name: "a pair that moved nothing", pairs: []given{{"a", "b", 0}}},
		{name: "a pair past its share", pairs: []given{{"a", "b", PairMax + 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := New().LoadState(statecodec.NewReader(enc(tc.agents, tc.pairs)))
			if (err == nil) != tc.ok {
				t.Fatalf("LoadState = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// FuzzLoadStateModel: no input panics LoadState, and a model it loads
// rates and snapshots without panicking.
func FuzzLoadStateModel(f *testing.F) {
	for i, n := range []int{0, 5, 300} {
		m := New()
		rateAll(m, ratings(uint64(i), n))
		f.Add(saved(f, m))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New()
		if m.LoadState(statecodec.NewReader(data)) != nil {
			return
		}
		if _, err := m.Snapshot(); err != nil {
			t.Fatal(err)
		}
		for i, x := range ratings(1, 20) {
			m.Rate(x.rater, x.ratee, x.delta, int64(i), x.seq)
			if s := m.Score(x.ratee); s < 0 || s > Scale {
				t.Fatalf("score %d after a rating", s)
			}
		}
	})
}
