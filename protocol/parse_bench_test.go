package protocol

import (
	"bytes"
	"strings"
	"testing"
)

// BenchmarkParse measures Parse on every reference frame, one sub-benchmark
// per file ("15-credit.transfer"), so that a change to the body reader shows
// up on the TYPEs the node sees most (credit.transfer, registry.update) and
// on the odd ones (nested entries, raw payloads) alike. The frames are
// decoded once, outside the timed loop: only Parse is measured.
func BenchmarkParse(b *testing.B) {
	for _, ref := range loadReference(b) {
		f, err := NewDecoder(bytes.NewReader(ref.bytes), DecoderOptions{}).Decode()
		if err != nil {
			b.Fatalf("Decode(%s) = %v", ref.name, err)
		}
		b.Run(strings.TrimSuffix(ref.name, ".aglx"), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(f.Body)))
			for b.Loop() {
				if _, err := Parse(f); err != nil {
					b.Fatalf("Parse(%s) = %v", ref.name, err)
				}
			}
		})
	}
}
