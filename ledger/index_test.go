package ledger

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestHashIndexGrows fills a hashIndex far past one table, so that tables
// double, split and the directory doubles, and checks that every key is
// found with its value and bit, that absent keys are not, and that each
// visits every key once.
func TestHashIndexGrows(t *testing.T) {
	x := newHashIndex()
	const n = 100_000 // keys: some 25 tables of hashTableMax slots
	keys := make([]string, n)
	find := func(key string) (uint32, bool, bool) {
		for p := x.probe(x.hash(key)); ; {
			v, bit, ok := p.next()
			if !ok || keys[v-1] == key {
				return v, bit, ok
			}
		}
	}
	for i := range keys {
		keys[i] = fmt.Sprintf("tx-%d", i)
		if _, _, ok := find(keys[i]); ok {
			t.Fatalf("%s found before it was inserted", keys[i])
		}
		x.insert(x.hash(keys[i]), uint32(i+1), i%3 == 0)
	}
	if x.len() != n || x.depth == 0 {
		t.Fatalf("len %d, depth %d: want %d keys over several tables", x.len(), x.depth, n)
	}
	for i, key := range keys {
		if v, bit, ok := find(key); !ok || v != uint32(i+1) || bit != (i%3 == 0) {
			t.Fatalf("find(%s) = %d, %v, %v; want %d, %v", key, v, bit, ok, i+1, i%3 == 0)
		}
		if _, _, ok := find(fmt.Sprintf("absent-%d", i)); ok {
			t.Fatalf("absent-%d found", i)
		}
	}
	seen := make([]bool, n)
	x.each(func(v uint32, bit bool) {
		if seen[v-1] || bit != ((v-1)%3 == 0) {
			t.Fatalf("each: value %d seen twice or with the wrong bit", v)
		}
		seen[v-1] = true
	})
	for i, ok := range seen {
		if !ok {
			t.Fatalf("each missed %s", keys[i])
		}
	}
	for i, tbl := range x.dir {
		span := 1 << (x.depth - tbl.depth)
		if first := i &^ (span - 1); x.dir[first] != tbl || x.dir[first+span-1] != tbl {
			t.Fatalf("directory entry %d: its table of depth %d does not cover entries %d..%d", i, tbl.depth, first, first+span-1)
		}
	}
}

// TestPackedRoundTrip holds pack and unpack to giving back every valid
// figure bit for bit, inline or out of line.
func TestPackedRoundTrip(t *testing.T) {
	l := New(node)
	rapid.Check(t, func(t *rapid.T) {
		d := drawFigure(t, "x")
		f := mustFixed(&d)
		p := l.pack(f)
		if got := l.unpack(p); got != f {
			t.Fatalf("unpack(pack(%s)) = %s (exp %d), want exp %d", f.text(), got.text(), got.exp(), f.exp())
		}
		m := f.mag()
		if inline := m.hi == 0 && m.lo <= packedMagMax; inline != (p&packedBig == 0) {
			t.Fatalf("pack(%s) inline = %v, want %v", f.text(), !inline, inline)
		}
	})
	for _, f := range []fixed{{}, mustFixed(amt("0.00").Decimal()), mustFixed(amt("-36028797018963967").Decimal()), mustFixed(amt("36028797018963968e-12").Decimal())} {
		if got := l.unpack(l.pack(f)); got != f {
			t.Errorf("unpack(pack(%s)) = %s", f.text(), got.text())
		}
	}
}
