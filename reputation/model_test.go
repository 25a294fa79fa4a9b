package reputation

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestRate: what one rating does to a score, in exact millionths.
func TestRate(t *testing.T) {
	tests := []struct {
		name string
		// before are ratings applied first: rater, ratee, delta.
		before    [][3]any
		rater     string
		delta     int64
		wantMoved int64
		wantScore int64
		capped    bool
	}{
		{name: "praise from an unrated mentor: a quarter, weighted by 0.5 and by the room left (0.5)",
			rater: "m", delta: 250_000, wantMoved: 62_500, wantScore: 562_500},
		{name: "blame moves down by the same rule",
			rater: "m", delta: -250_000, wantMoved: -62_500, wantScore: 437_500},
		{name: "a whole point from an unrated mentor is cut to one rater's share",
			rater: "m", delta: Scale, wantMoved: 200_000, wantScore: 700_000, capped: true}, // 250,000 asked, PairMax 200,000
		{name: "a rater with a low score moves little", // m at 0.075 after three blames
			before: [][3]any{{"x", "m", int64(-Scale)}, {"y", "m", int64(-Scale)}, {"z", "m", int64(-Scale)}},
			rater:  "m", delta: Scale, wantMoved: 37_500, wantScore: 537_500},
		{name: "one rater's share is spent: nothing more",
			before: [][3]any{{"m", "a", int64(Scale)}},
			rater:  "m", delta: Scale, wantMoved: 0, wantScore: 700_000},
		{name: "rating oneself does nothing", rater: "a", delta: Scale, wantMoved: 0, wantScore: Default},
		{name: "a delta beyond a point is a point", rater: "m", delta: 5 * Scale, wantMoved: 200_000, wantScore: 700_000, capped: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			for i, b := range tc.before {
				m.Rate(b[0].(string), b[1].(string), b[2].(int64), int64(i), 1)
			}
			capped := m.Counts().Capped
			moved, _ := m.Rate(tc.rater, "a", tc.delta, 100, 2)
			if moved != tc.wantMoved || m.Score("a") != tc.wantScore {
				t.Fatalf("moved %d to %d; want %d to %d", moved, m.Score("a"), tc.wantMoved, tc.wantScore)
			}
			if got := m.Counts().Capped > capped; got != tc.capped {
				t.Errorf("capped = %v, want %v", got, tc.capped)
			}
		})
	}
}

// TestLowScoresRiseFaster pins the rule's shape: the same praise from the
// same mentor moves a low score further than a high one.
func TestLowScoresRiseFaster(t *testing.T) {
	m := New()
	m.Rate("x", "low", -Scale, 1, 1)
	m.Rate("y", "high", Scale, 1, 1)
	up := func(who string) int64 { moved, _ := m.Rate("m", who, 100_000, 2, 2); return moved }
	if low, high := up("low"), up("high"); low <= high {
		t.Fatalf("praise moved a low score %d and a high one %d", low, high)
	}
}

// TestCopiesAreNotRatings: a rating stamped at or before the pair's last
// applied one is a copy (a signed feedback sent again) and moves nothing
// (helper-78); a later one from the same rater, or one from another
// rater with any stamp, does.
func TestCopiesAreNotRatings(t *testing.T) {
	m := New()
	if moved, _ := m.Rate("m", "a", 100_000, 10, 1); moved == 0 {
		t.Fatal("the first rating moved nothing")
	}
	for _, stamp := range []int64{10, 9} {
		if moved, why := m.Rate("m", "a", 100_000, stamp, 2); moved != 0 || why == "" {
			t.Fatalf("a rating stamped %d after one stamped 10 moved %d", stamp, moved)
		}
	}
	if m.Counts().Stale != 2 {
		t.Fatalf("stale = %d, want 2", m.Counts().Stale)
	}
	if moved, _ := m.Rate("m", "a", 100_000, 11, 3); moved == 0 {
		t.Fatal("a later rating moved nothing")
	}
	if moved, _ := m.Rate("n", "a", 100_000, 1, 4); moved == 0 {
		t.Fatal("another rater's rating moved nothing")
	}
}

// TestModelProperties: whatever the ratings, every score stays from 0 to
// Scale, no rater moves one agent further than PairMax in all, and two
// models fed the same ratings write the same bytes.
func TestModelProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		agents := []string{"a", "b", "c", "d"}
		m, again := New(), New()
		moved := map[pair]int64{}
		for i := range rapid.IntRange(1, 200).Draw(rt, "ratings") {
			rater := rapid.SampledFrom(agents).Draw(rt, "rater")
			ratee := rapid.SampledFrom(agents).Draw(rt, "ratee")
			delta := rapid.Int64Range(-2*Scale, 2*Scale).Draw(rt, "delta")
			stamp := rapid.Int64Range(0, 10).Draw(rt, "stamp")
			n, _ := m.Rate(rater, ratee, delta, stamp, uint64(i))
			again.Rate(rater, ratee, delta, stamp, uint64(i))
			if n != 0 && (n > 0) != (delta > 0) {
				rt.Fatalf("a delta of %d moved %d", delta, n)
			}
			p := pair{rater, ratee}
			if moved[p] += abs(n); moved[p] > PairMax {
				rt.Fatalf("%s moved %s by %d in all", rater, ratee, moved[p])
			}
			for _, a := range agents {
				if s := m.Score(a); s < 0 || s > Scale {
					rt.Fatalf("%s scores %d", a, s)
				}
			}
		}
		b1, err := m.Snapshot()
		if err != nil {
			rt.Fatal(err)
		}
		b2, _ := again.Snapshot()
		if !bytes.Equal(b1, b2) {
			rt.Fatalf("the same ratings wrote\n%s\nand\n%s", b1, b2)
		}
	})
}

// TestBounds: past PairsMax pairs, a new pair's rating is refused and
// counted; ratings within known pairs still apply.
func TestBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("fills two million pairs")
	}
	m := New()
	for i := range PairsMax {
		m.given[pair{fmt.Sprint("r", i), "a"}] = given{moved: 1}
	}
	if moved, why := m.Rate("new", "a", Scale, 1, 1); moved != 0 || why == "" || m.Counts().Refused != 1 {
		t.Fatalf("a rating from a new pair past the bound moved %d (%q)", moved, why)
	}
	if moved, _ := m.Rate("r1", "a", Scale, 2, 2); moved == 0 {
		t.Fatal("a known pair's rating was refused")
	}
}
