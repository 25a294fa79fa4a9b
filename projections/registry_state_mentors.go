package projections

import "github.com/aglx/ledger/ledger/statecodec"

// The mentor directory's saved state (mentors.go): each mentor with its
// latest report, in the order of mentorsListed, whose chunks are saved
// with it.

// saveMentors writes the directory.
func (r *Registry) saveMentors(w *statecodec.Writer) {
	saveListed(w, &r.mentorsListed, func(uri string) { writeMentor(w, r.mentors[uri]) })
}

// loadMentors reads what saveMentors wrote.
func (r *Registry) loadMentors(rd *statecodec.Reader) {
	r.mentorsListed = loadListed(rd, "mentor", func(uri string) { r.mentors[uri] = readMentor(rd) })
	if len(r.mentors) > MentorsMax {
		rd.Failf("registry: %d mentors, more than the directory's bound of %d", len(r.mentors), MentorsMax)
	}
}

func writeMentor(w *statecodec.Writer, m *mentor) {
	w.String(m.Name)
	writeStrings(w, m.Expertise)
	w.Bool(m.Available)
	writeOptFloat(w, m.Rating)
	w.Time(m.RegisteredAt)
	w.Time(m.UpdatedAt)
	w.Bool(m.Report != nil)
	if rep := m.Report; rep != nil {
		w.Int(rep.SessionsTotal)
		writeOptInt(w, rep.MenteesSupported)
		writeOptFloat(w, rep.AvgScore)
		w.String(rep.CreditsEarned)
		w.String(rep.Timestamp)
		w.Time(rep.ReceivedAt)
		w.Uint(rep.Seq)
	}
}

func readMentor(rd *statecodec.Reader) *mentor {
	m := &mentor{Name: rd.String(), Expertise: readStrings(rd), Available: rd.Bool(), Rating: readOptFloat(rd),
		RegisteredAt: rd.Time(), UpdatedAt: rd.Time()}
	if rd.Bool() {
		m.Report = &MentorReport{SessionsTotal: rd.Int(), MenteesSupported: readOptInt(rd), AvgScore: readOptFloat(rd),
			CreditsEarned: rd.String(), Timestamp: rd.String(), ReceivedAt: rd.Time(), Seq: rd.Uint()}
	}
	return m
}
