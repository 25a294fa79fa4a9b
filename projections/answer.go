package projections

import (
	"context"

	"github.com/aglx/ledger/protocol"
)

// Answers lets the bridge wait for the reply the projections decided for a
// message: it waits until the runner has applied the message's event, then
// takes the reply from the outbox. A message of a TYPE no projection
// answers is not waited for.
type Answers struct {
	runner *Runner
	outbox *Outbox
	types  map[string]bool
}

// NewAnswers returns the answerer for the given TYPE lists.
func NewAnswers(r *Runner, o *Outbox, types ...[]string) *Answers {
	a := &Answers{runner: r, outbox: o, types: map[string]bool{}}
	for _, ts := range types {
		for _, t := range ts {
			a.types[t] = true
		}
	}
	return a
}

// Answers reports whether a projection may decide the reply to typ.
func (a *Answers) Answers(typ string) bool { return a.types[typ] }

// Answer waits until the event at seq is applied and returns the reply a
// projection decided for it, if any.
func (a *Answers) Answer(ctx context.Context, seq uint64) (Reply, bool, error) {
	if err := a.runner.WaitFor(ctx, seq); err != nil {
		return Reply{}, false, err
	}
	return a.outbox.Take(seq)
}

// Ready reports whether the event at seq is applied, so that Answer
// would not wait.
func (a *Answers) Ready(seq uint64) bool { return a.runner.Applied() >= seq }

// AnswersRegistry lists the TYPEs whose reply the registry may decide.
var AnswersRegistry = []string{
	protocol.TypeRegistryUpdate, protocol.TypeRegistryFetch, protocol.TypeRegistrySync,
	protocol.TypeRegistryExchange, protocol.TypeMentorRegister, protocol.TypeMentorReport,
	protocol.TypeAuthRequest, protocol.TypeKeyRotate, protocol.TypeZoneJoin, protocol.TypeZoneLeave,
}
