package protocol

import (
	"encoding/json"
	"math"
)

// Mentor payloads: knowledge sharing and the reputation it earns (reference
// chapter "Mentor-Nachrichten"). Scores, ratings and reputation deltas are
// not money; they are float64, within [0, 1] (deltas within [-1, 1]) as in
// the reference. A reputation projection that sums them must not rely on
// float64 addition being the same on every platform: the body's exact text
// stays in Message.Frame.Body.

// MentorRequest is mentor.request: an agent asks a mentor for advice on a
// task it did.
type MentorRequest struct {
	TaskID string `json:"task_id"`
	// Context names the field of the task, e.g. "data.analyze".
	Context string `json:"context,omitempty"`
	// Metrics are the task's measurements (duration, accuracy, ...), kept as
	// received.
	Metrics json.RawMessage `json:"metrics,omitempty"`
	Comment string          `json:"comment,omitempty"`
}

// Validate requires task_id, which a later credit.reward refers to;
// metrics, if given, is an object.
func (p *MentorRequest) Validate() error {
	var c fieldCheck
	c.id("task_id", p.TaskID, true)
	c.object("metrics", p.Metrics, false)
	return c.result()
}

// MentorFeedback is mentor.feedback: the mentor's judgement, with an
// optional reward in credits.
type MentorFeedback struct {
	Score           *float64  `json:"score"`
	Comment         string    `json:"comment,omitempty"`
	Reward          *Amount   `json:"reward,omitempty"`
	ReputationDelta *float64  `json:"reputation_delta,omitempty"`
	Timestamp       Timestamp `json:"timestamp,omitzero"`
}

// Validate requires a score from 0 to 1; a reward, if given, is not
// negative; a reputation_delta, if given, is from -1 to 1.
func (p *MentorFeedback) Validate() error {
	var c fieldCheck
	c.fraction("score", p.Score, true)
	c.amount("reward", p.Reward, false, amountNotNegative)
	if d := p.ReputationDelta; d != nil && !(*d >= -1 && *d <= 1) {
		c.failf("field %q must be from -1 to 1", "reputation_delta")
	}
	return c.result()
}

// MentorRegister is mentor.register: an agent offers itself as a mentor.
type MentorRegister struct {
	AgentName string   `json:"agent_name"`
	Expertise []string `json:"expertise"`
	Available *bool    `json:"available,omitempty"`
	Rating    *float64 `json:"rating,omitempty"`
}

// Validate requires agent_name and at least one expertise: a mentor for
// nothing cannot be matched to anyone.
func (p *MentorRegister) Validate() error {
	var c fieldCheck
	c.label("agent_name", p.AgentName, true)
	c.words("expertise", p.Expertise, true)
	c.fraction("rating", p.Rating, false)
	return c.result()
}

// MentorReport is mentor.report: a mentor's statistics, sent to the
// registry.
type MentorReport struct {
	SessionsTotal    *int64    `json:"sessions_total"`
	MenteesSupported *int64    `json:"mentees_supported,omitempty"`
	AvgScore         *float64  `json:"avg_score,omitempty"`
	CreditsEarned    *Amount   `json:"credits_earned,omitempty"`
	Timestamp        Timestamp `json:"timestamp,omitzero"`
}

// Validate requires sessions_total; counts and credits are not negative and
// avg_score is from 0 to 1.
func (p *MentorReport) Validate() error {
	var c fieldCheck
	c.integer("sessions_total", p.SessionsTotal, true, 0, math.MaxInt64)
	c.integer("mentees_supported", p.MenteesSupported, false, 0, math.MaxInt64)
	c.fraction("avg_score", p.AvgScore, false)
	c.amount("credits_earned", p.CreditsEarned, false, amountNotNegative)
	return c.result()
}
