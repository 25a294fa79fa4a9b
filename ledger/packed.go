package ledger

// packed is a posting's figure in 8 bytes: the figure itself when its
// coefficient fits 55 bits, as nearly every figure does (2^55 is 3.6×10^16:
// 360 trillion credits to the cent), or else the index of the exact figure
// in Ledger.bigFigures.
//
// Why: a posting keeps three figures (amount and both running balances)
// for ever, and on this VM every fresh byte costs about 3 ns of page
// faults. As fixed they took 48 bytes of a 112-byte posting; packed they
// take 24. Postings never change, so a figure that does not fit is
// appended once and never moves. Account figures, which change at every
// posting, stay fixed.
//
// Layout, inline (bit 63 clear): bit 62 the sign, bits 55 to 61 the
// exponent as fixed keeps it (7-bit two's complement), bits 0 to 54 the
// magnitude. Out of line (bit 63 set): bits 0 to 31 the index. The zero
// packed is zero with exponent 0, like the zero fixed, and unpack(pack(f))
// is f bit for bit: the exponent is kept, so 2.50 stays 2.50.
type packed uint64

const (
	packedBig      = 1 << 63
	packedNeg      = 1 << 62
	packedExpShift = 55
	packedMagMax   = 1<<packedExpShift - 1
)

// bigFiguresMax bounds Ledger.bigFigures so that its 32-bit index never
// wraps; book refuses (413) a posting that could pass it.
const bigFiguresMax = 1<<32 - 1 // figures

// pack stores f in a posting's 8 bytes, appending it to l.bigFigures if
// it does not fit.
func (l *Ledger) pack(f fixed) packed {
	if m := f.mag(); m.hi == 0 && m.lo <= packedMagMax {
		p := packed(m.lo) | packed(uint64(f.exp())&0x7f)<<packedExpShift
		if f.neg() {
			p |= packedNeg
		}
		return p
	}
	i, row := l.bigFigures.add()
	*row = f
	return packedBig | packed(i)
}

// unpack returns the figure p stands for.
func (l *Ledger) unpack(p packed) fixed {
	if p&packedBig != 0 {
		return *l.bigFigures.get(uint32(p))
	}
	exp := int(int8(uint8(p>>packedExpShift)<<1) >> 1)
	return packFixed(u128{lo: uint64(p & packedMagMax)}, exp, p&packedNeg != 0)
}
