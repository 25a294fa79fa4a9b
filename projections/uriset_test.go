package projections

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestURISet: after any inserts and removes, paging from any key gives
// exactly the keys greater than it, in order, as a sorted slice would, and
// the chunks keep their invariant (checkChunks).
func TestURISet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s uriSet
		var want []string
		removeOdds := rapid.IntRange(0, 90).Draw(t, "percent of steps that remove")
		for range rapid.IntRange(0, 3000).Draw(t, "steps") {
			if len(want) > 0 && rapid.IntRange(0, 99).Draw(t, "roll") < removeOdds {
				i := rapid.IntRange(0, len(want)-1).Draw(t, "removed")
				s.remove(want[i])
				want = slices.Delete(want, i, i+1)
				continue
			}
			k := fmt.Sprintf("agent://a%05d.local", rapid.IntRange(0, 20000).Draw(t, "key"))
			if _, found := slices.BinarySearch(want, k); found {
				continue
			}
			s.insert(k)
			i, _ := slices.BinarySearch(want, k)
			want = slices.Insert(want, i, k)
		}
		checkChunks(t, &s)
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

// checkChunks checks the chunks' invariant: each sorted and holding a key,
// in order across chunks, and any two neighbours holding more than
// sortedChunkMax/2 keys between them.
func checkChunks(t interface {
	Helper()
	Fatalf(string, ...any)
}, s *uriSet) {
	t.Helper()
	for i, c := range s.chunks {
		if len(c) == 0 || len(c) > sortedChunkMax || !slices.IsSorted(c) {
			t.Fatalf("chunk %d of %d holds %d keys (sorted %v)", i, len(s.chunks), len(c), slices.IsSorted(c))
		}
		if i == 0 {
			continue
		}
		prev := s.chunks[i-1]
		if prev[len(prev)-1] >= c[0] {
			t.Fatalf("chunk %d ends at %q, after chunk %d begins (%q)", i-1, prev[len(prev)-1], i, c[0])
		}
		if n := len(prev) + len(c); n <= sortedChunkMax/2 {
			t.Fatalf("chunks %d and %d hold %d keys between them; want more than %d", i-1, i, n, sortedChunkMax/2)
		}
	}
}

// TestURISetRemove: thousands of keys inserted, then most removed, in
// several orders: the rest list in order, and the chunks shrink with them
// (at most 2n/(sortedChunkMax/2)+1 for n keys). A key removed and put
// back is listed again.
func TestURISetRemove(t *testing.T) {
	const n = 5000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("agent://a%05d.local", i)
	}
	tests := []struct {
		name string
		gone func() []string // the keys removed, in the order removed
	}{
		{"all, in order", func() []string { return slices.Clone(keys) }},
		{"all, in reverse", func() []string { k := slices.Clone(keys); slices.Reverse(k); return k }},
		{"all but every hundredth", func() []string {
			var k []string
			for i, key := range keys {
				if i%100 != 0 {
					k = append(k, key)
				}
			}
			return k
		}},
		{"nine in ten, shuffled", func() []string {
			k := slices.Clone(keys)
			rand.New(rand.NewPCG(3, 4)).Shuffle(n, func(i, j int) { k[i], k[j] = k[j], k[i] })
			return k[:n*9/10]
		}},
		{"the middle", func() []string { return slices.Clone(keys[n/10 : n*9/10]) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s uriSet
			for _, k := range keys {
				s.insert(k)
			}
			gone := tt.gone()
			for _, k := range gone {
				s.remove(k)
			}
			checkChunks(t, &s)
			want := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return slices.Contains(gone, k) })
			var got []string
			s.after("", func(k string) bool { got = append(got, k); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("listed %d keys (first %v), want %d (first %v)", len(got), first3(got), len(want), first3(want))
			}
			if most := 2*len(want)/(sortedChunkMax/2) + 1; len(s.chunks) > most {
				t.Errorf("%d chunks for %d keys; want at most %d", len(s.chunks), len(want), most)
			}
			if len(want) > 0 {
				back := want[len(want)/2]
				s.remove(back)
				if s.has(back) {
					t.Fatalf("has(%s) after its remove", back)
				}
				s.insert(back)
				if !s.has(back) || s.len() != len(want) {
					t.Fatalf("has(%s) = %v, len %d after it was put back; want true, %d", back, s.has(back), s.len(), len(want))
				}
			}
		})
	}
}
