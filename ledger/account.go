package ledger

import (
	"errors"
	"strconv"
	"time"
	"unsafe"

	"github.com/aglx/ledger/protocol"
)

// accountID is an account's index in the table: URIs are interned once, so
// postings and holds name an account in 4 bytes instead of a string.
type accountID uint32

// issuance is the node's own account, created by New as the first one.
const issuance accountID = 0

// accountsMax bounds the accounts of one ledger. At about 200 bytes an
// account it is far above what one node's memory holds; it exists so that
// the 32-bit id can never wrap.
const accountsMax = 1 << 31 // accounts

// account is the state of one URI. Its fields are the figures of
// AccountView; available is not stored but is balance minus pending.
type account struct {
	// short holds the URI if it is at most uriShortMax bytes long, as most
	// are; uri then holds only its length. A lookup compares the URI in
	// the row it reads anyway, not in the arena, a cache miss fewer.
	short   [uriShortMax]byte
	uri     strRef
	balance fixed
	pending fixed // sum of the live holds on the account
	earned  fixed // sum of the amounts posted to the account
	spent   fixed // sum of the amounts posted from the account
	updated int64 // event time of the last change, Unix ns; 0 for never
	seq     uint64
	// entries lists the account's postings in sequence order (entries.go).
	entries entryList
}

// uriShortMax is the longest URI kept in the account row itself.
const uriShortMax = 32 // bytes

// name returns the account's URI. A short one aliases the row's bytes,
// which never change or move once written (chunked).
func (a *account) name(ar *arena) string {
	if n := int(a.uri); n <= uriShortMax {
		if n == 0 {
			return ""
		}
		return unsafe.String(&a.short[0], n)
	}
	return ar.get(a.uri)
}

// accountTable interns URIs and holds the accounts.
//
// Its index maps the hash of a URI to the id + 1 of its account; the URI
// is compared in the account row, which the caller needs anyway, so a
// lookup reads one index slot and the row.
type accountTable struct {
	rows  chunked[account]
	index hashIndex
}

func newAccountTable() accountTable {
	return accountTable{index: newHashIndex()}
}

func (t *accountTable) get(id accountID) *account { return t.rows.get(uint32(id)) }

// len returns the number of accounts.
func (t *accountTable) len() int { return t.rows.len() }

// lookup returns the id of uri's account, if it has one. It never creates.
func (l *Ledger) lookup(uri string) (accountID, bool) {
	x := &l.accounts.index
	for p := x.probe(x.hash(uri)); ; {
		v, _, ok := p.next()
		if !ok {
			return 0, false
		}
		if l.accounts.rows.get(v-1).name(&l.strs) == uri {
			return accountID(v - 1), true
		}
	}
}

// create adds an account for uri, which must not have one yet.
func (l *Ledger) create(uri string) accountID {
	t := &l.accounts
	i, a := t.rows.add()
	if len(uri) <= uriShortMax {
		a.uri = strRef(copy(a.short[:], uri))
	} else {
		a.uri = l.strs.put(uri)
	}
	t.index.insert(t.index.hash(uri), i+1, false)
	return accountID(i)
}

// uri returns the URI of an account.
func (l *Ledger) uri(id accountID) string { return l.accounts.get(id).name(&l.strs) }

// checkNewURI says why uri cannot get an account, or returns "". Only a URI
// in its canonical spelling gets one, so that one agent never has two.
func (l *Ledger) checkNewURI(field, uri string) string {
	if l.accounts.len() >= accountsMax {
		return "the ledger holds the most accounts it can"
	}
	u, err := protocol.ParseURI(uri)
	if pe := (*protocol.Error)(nil); errors.As(err, &pe) {
		return field + " " + pe.Reason
	} else if err != nil {
		return field + " " + err.Error()
	}
	if u.String() != uri {
		return field + " " + strconv.Quote(uri) + " is not in canonical form; expected " + strconv.Quote(u.String())
	}
	return ""
}

// AccountView is an account's figures as the HTTP API and the
// credit.balance reply show them. Money is written as JSON strings.
//
// Fields are declared in the order of their JSON names, so that
// json.Marshal writes the keys sorted (Snapshot is canonical JSON).
type AccountView struct {
	// Available is Balance minus Pending: what the account can spend.
	Available protocol.Amount `json:"available"`
	Balance   protocol.Amount `json:"balance"`
	// EarnedTotal and SpentTotal sum every amount ever posted to and from
	// the account, adjustments included, so Balance = EarnedTotal -
	// SpentTotal.
	EarnedTotal protocol.Amount `json:"earned_total"`
	// Pending is the sum of the live holds: credits promised by
	// credit.approve or task.assign and not yet paid or released.
	Pending protocol.Amount `json:"pending"`
	// Seq is the sequence of the last event that changed the account.
	Seq        uint64          `json:"seq"`
	SpentTotal protocol.Amount `json:"spent_total"`
	// Updated is the event time of that change (or, for an expired hold,
	// its expiry).
	Updated time.Time `json:"updated,omitzero"`
	URI     string    `json:"uri"`
}

// Account returns the figures of uri as of the last event applied, and
// whether the URI has an account. A URI without one has zero figures.
func (l *Ledger) Account(uri string) (AccountView, bool) {
	return l.AccountAt(uri, time.Time{})
}

// AccountAt is Account as of the time at: holds that expire by at are left
// out of Pending, though no event has released them yet. The HTTP API
// passes the wall clock here; the ledger itself never reads it. A zero at
// means the state as it stands. Holds already released stay released
// whatever at says: AccountAt looks ahead, never back.
func (l *Ledger) AccountAt(uri string, at time.Time) (AccountView, bool) {
	id, ok := l.lookup(uri)
	if !ok {
		return AccountView{URI: uri}, false
	}
	a := l.accounts.get(id)
	v := l.view(a)
	if at.IsZero() || len(l.holds.live[id]) == 0 {
		return v, true
	}
	pending, lapsed := l.pendingAt(id, unixNano(at))
	if lapsed > a.updated {
		v.Updated = timeOf(lapsed)
	}
	v.Pending = amountOfFixed(pending)
	v.Available = l.availableOf(a.balance, pending)
	return v, true
}

// view copies an account's figures out.
func (l *Ledger) view(a *account) AccountView {
	return AccountView{
		Available:   l.available(a),
		Balance:     amountOfFixed(a.balance),
		EarnedTotal: amountOfFixed(a.earned),
		Pending:     amountOfFixed(a.pending),
		Seq:         a.seq,
		SpentTotal:  amountOfFixed(a.spent),
		Updated:     timeOf(a.updated),
		URI:         a.name(&l.strs),
	}
}

// touch records that the event changed the account.
func (a *account) touch(e *Event) {
	a.updated = unixNano(e.Time)
	a.seq = e.Seq
}

// unixNano and timeOf convert event times to and from the stored form.
// The zero time is stored as 0 so that it reads back as the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}
