package statetest

import (
	"sync"
	"testing"
)

type inner struct{ n int }

type fold struct {
	mu    sync.Mutex
	cb    func() int
	items map[string]*inner
	cache int
	self  *fold
}

func TestDiff(t *testing.T) {
	mk := func(n, cache int) *fold {
		f := &fold{cb: func() int { return n }, items: map[string]*inner{"a": {n}}, cache: cache}
		f.self = f // a cycle, as folds that point at each other have
		return f
	}
	cases := []struct {
		name     string
		a, b     *fold
		skip     []string
		wantDiff bool
	}{
		{"equal state, other callbacks", mk(1, 0), mk(1, 0), nil, false},
		{"an unexported field deep down differs", mk(1, 0), mk(2, 0), nil, true},
		{"a field that is not saved", mk(1, 0), mk(1, 7), nil, true},
		{"the same, skipped by name", mk(1, 0), mk(1, 7), []string{"fold.cache"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := Diff(c.a, c.b, c.skip...); (d != "") != c.wantDiff {
				t.Fatalf("Diff = %q, want a difference: %v", d, c.wantDiff)
			}
		})
	}
}
