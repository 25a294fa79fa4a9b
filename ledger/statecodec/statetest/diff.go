// Package statetest compares a fold's state with the state restored from
// its saved copy, for the tests of every fold's SaveState and LoadState.
package statetest

import (
	"reflect"

	"github.com/google/go-cmp/cmp"
)

// Diff reports how the state reachable from want and got differs, or ""
// when it does not: every field, exported or not, through pointers, maps
// and slices, as a fold's own code would see it. It leaves out what is not
// state: functions (wiring, such as a callback into another fold) and the
// sync and sync/atomic types (locks and counters that are not folded).
//
// A saved state that leaves out a field the fold keeps shows up here as a
// difference, where a comparison of the folds' canonical snapshots would
// not see it when the field is never shown (a memory of recent messages,
// an index). A field that is deliberately not saved, such as a cache that
// changes no outcome, is passed in skip by name ("Registry.last").
func Diff(want, got any, skip ...string) string {
	skipped := make(map[string]bool, len(skip))
	for _, s := range skip {
		skipped[s] = true
	}
	return cmp.Diff(want, got,
		cmp.Exporter(func(reflect.Type) bool { return true }),
		cmp.FilterPath(func(p cmp.Path) bool {
			t := p.Last().Type()
			if t.Kind() == reflect.Func {
				return true
			}
			if pkg := t.PkgPath(); pkg == "sync" || pkg == "sync/atomic" {
				return true
			}
			if sf, ok := p.Last().(cmp.StructField); ok && len(p) >= 2 {
				owner := p.Index(-2).Type()
				for owner.Kind() == reflect.Pointer {
					owner = owner.Elem()
				}
				return skipped[owner.Name()+"."+sf.Name()]
			}
			return false
		}, cmp.Ignore()),
	)
}
