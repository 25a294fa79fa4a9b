package projections

import (
	"fmt"
	"slices"
	"time"

	"github.com/aglx/ledger/protocol"
)

// The mentor directory: agents that offer advice (mentor.register) and the
// figures they report (mentor.report). It is what a matcher would read to
// find a mentor for a field; the reputation the advice earns is another
// projection's.

// MentorsMax bounds the directory.
const MentorsMax = 1 << 16 // mentors

// mentor is one directory entry.
type mentor struct {
	Name         string        `json:"name"`
	Expertise    []string      `json:"expertise"`
	Available    bool          `json:"available"`
	Rating       *float64      `json:"rating,omitempty"`
	RegisteredAt time.Time     `json:"registered_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
	Report       *MentorReport `json:"report,omitempty"`
}

// MentorReport is the latest mentor.report of a mentor: its own figures,
// as it stated them. CreditsEarned is a decimal string, as money always is
// in what the node writes.
type MentorReport struct {
	SessionsTotal    int64    `json:"sessions_total"`
	MenteesSupported *int64   `json:"mentees_supported,omitempty"`
	AvgScore         *float64 `json:"avg_score,omitempty"`
	CreditsEarned    string   `json:"credits_earned,omitempty"`
	// Timestamp is the report's own, as written; ReceivedAt is the event
	// time.
	Timestamp  string    `json:"timestamp,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	Seq        uint64    `json:"seq"`
}

// IsMentor reports whether uri is in the mentor directory.
func (r *Registry) IsMentor(uri string) bool { return r.mentors[uri] != nil }

// mentorRegister adds or updates the sender in the directory. Availability
// not stated counts as available: registering says one is.
func (r *Registry) mentorRegister(e *Event, p *protocol.MentorRegister) {
	if r.refuseInauthentic(e) {
		return
	}
	m := r.mentors[e.From]
	if m == nil {
		if len(r.mentors) >= MentorsMax {
			r.refuse(e, protocol.StatusUnavailable, fmt.Sprintf("the mentor directory holds %d mentors, its limit", MentorsMax))
			return
		}
		m = &mentor{RegisteredAt: r.now}
		r.mentors[e.From] = m
		r.mentorsListed.insert(e.From)
	}
	m.Name, m.Expertise, m.Available, m.UpdatedAt = p.AgentName, slices.Clone(p.Expertise), true, r.now
	if p.Available != nil {
		m.Available = *p.Available
	}
	if p.Rating != nil {
		rating := *p.Rating
		m.Rating = &rating
	}
	r.ack(e, ackBody{})
}

// mentorReport keeps a registered mentor's latest figures.
func (r *Registry) mentorReport(e *Event, p *protocol.MentorReport) {
	if r.refuseInauthentic(e) {
		return
	}
	m := r.mentors[e.From]
	if m == nil {
		r.refuse(e, protocol.StatusNotFound, fmt.Sprintf("%s is not in the mentor directory; send mentor.register first", e.From))
		return
	}
	rep := &MentorReport{SessionsTotal: *p.SessionsTotal, ReceivedAt: r.now, Seq: e.Seq}
	if p.MenteesSupported != nil {
		n := *p.MenteesSupported
		rep.MenteesSupported = &n
	}
	if p.AvgScore != nil {
		s := *p.AvgScore
		rep.AvgScore = &s
	}
	if p.CreditsEarned != nil {
		rep.CreditsEarned = p.CreditsEarned.String()
	}
	if !p.Timestamp.IsZero() {
		rep.Timestamp = p.Timestamp.String()
	}
	m.Report, m.UpdatedAt = rep, r.now
	r.ack(e, ackBody{})
}

// MentorView is one mentor as queries show it: its URI, then the entry's
// own fields, copied so that the caller may keep it.
type MentorView struct {
	AgentURI string `json:"agent_uri"`
	mentor
}

// Mentors lists the directory, sorted by URI. Call it under Runner.View.
func (r *Registry) Mentors() []MentorView { return r.MentorsPage("", len(r.mentors)) }

// MentorsPage is the mentor directory in URI order, from the first URI
// after after, at most limit entries (MentorsPageMax when limit is out of
// range): the whole directory, up to MentorsMax entries of free text,
// is too much for one answer.
func (r *Registry) MentorsPage(after string, limit int) []MentorView {
	if limit <= 0 || limit > max(MentorsPageMax, len(r.mentors)) {
		limit = MentorsPageMax
	}
	out := []MentorView{}
	// In order from the list kept as mentors register: every page
	// sorted the whole directory on the fold's lock (helper-75).
	r.mentorsListed.after(after, func(uri string) bool {
		if len(out) == limit {
			return false
		}
		out = append(out, r.mentorView(uri, r.mentors[uri]))
		return true
	})
	return out
}

// MentorsPageMax is the most mentors one page of the directory holds.
const MentorsPageMax = 1_000 // mentors

func (r *Registry) mentorView(uri string, m *mentor) MentorView {
	v := MentorView{AgentURI: uri, mentor: *m}
	v.Expertise = slices.Clone(m.Expertise)
	if m.Rating != nil {
		rating := *m.Rating
		v.Rating = &rating
	}
	if m.Report != nil {
		rep := *m.Report
		v.Report = &rep
	}
	return v
}
