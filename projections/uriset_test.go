package projections

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestURISet: after any inserts, paging from any key gives exactly the
// keys greater than it, in order, as a sorted slice would.
func TestURISet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s uriSet
		var want []string
		for range rapid.IntRange(0, 3000).Draw(t, "inserts") {
			k := fmt.Sprintf("agent://a%05d.local", rapid.IntRange(0, 20000).Draw(t, "key"))
			if _, found := slices.BinarySearch(want, k); found {
				continue
			}
			s.insert(k)
			i, _ := slices.BinarySearch(want, k)
			want = slices.Insert(want, i, k)
		}
		if s.len() != len(want) {
			t.Fatalf("len %d, want %d", s.len(), len(want))
		}
		for range 20 {
			k := fmt.Sprintf("agent://a%05d.local", rapid.IntRange(0, 20001).Draw(t, "asked"))
			if _, in := slices.BinarySearch(want, k); s.has(k) != in {
				t.Fatalf("has(%s) = %v, want %v", k, !in, in)
			}
		}
		from := fmt.Sprintf("agent://a%05d.local", rapid.IntRange(0, 20001).Draw(t, "after"))
		if rapid.Bool().Draw(t, "from the start") {
			from = ""
		}
		limit := rapid.IntRange(1, 5000).Draw(t, "limit")
		var got []string
		s.after(from, func(k string) bool {
			got = append(got, k)
			return len(got) < limit
		})
		i, found := slices.BinarySearch(want, from)
		if found {
			i++
		}
		exp := want[i:]
		if len(exp) > limit {
			exp = exp[:limit]
		}
		if !slices.Equal(got, exp) {
			t.Fatalf("after(%q) limit %d: got %d keys, want %d (first got %v, want %v)", from, limit, len(got), len(exp), first3(got), first3(exp))
		}
	})
}

func first3(s []string) []string { return s[:min(3, len(s))] }

// TestURISetSplits: thousands of keys, in reverse order and shuffled, so
// that chunks fill and split many times, still list in order.
func TestURISetSplits(t *testing.T) {
	const n = 5000
	for _, order := range []string{"reverse", "shuffled"} {
		t.Run(order, func(t *testing.T) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("agent://a%05d.local", i)
			}
			ins := slices.Clone(keys)
			if order == "reverse" {
				slices.Reverse(ins)
			} else {
				rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { ins[i], ins[j] = ins[j], ins[i] })
			}
			var s uriSet
			for _, k := range ins {
				s.insert(k)
			}
			if len(s.chunks) < n/sortedChunkMax {
				t.Fatalf("%d chunks for %d keys: the chunks never split", len(s.chunks), n)
			}
			var got []string
			s.after("", func(k string) bool { got = append(got, k); return true })
			if !slices.Equal(got, keys) {
				t.Fatalf("listed %d keys, not the %d in order", len(got), n)
			}
		})
	}
}
