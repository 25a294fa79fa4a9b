package protocol

import "sort"

// The TYPEs the node knows: those of the AGLX reference (AGLX-NOTES.md
// section 2) and the two handshakes the project adds (section 3). Other
// packages switch on these constants rather than on string literals, so that a
// misspelt TYPE is a compile error rather than a message silently ignored.
const (
	TypeTaskAssign = "task.assign"
	TypeTaskResult = "task.result"
	TypeTaskReject = "task.reject"
	TypeTaskRetry  = "task.retry"
	TypeTaskCancel = "task.cancel"

	TypeRegistryUpdate   = "registry.update"
	TypeRegistryAck      = "registry.ack"
	TypeRegistryFetch    = "registry.fetch"
	TypeRegistryList     = "registry.list"
	TypeRegistrySync     = "registry.sync"
	TypeRegistryExchange = "registry.exchange"
	TypeAgentAnnounce    = "agent.announce"

	TypeCreditTransfer = "credit.transfer"
	TypeCreditReceived = "credit.received"
	TypeCreditRequest  = "credit.request"
	TypeCreditApprove  = "credit.approve"
	TypeCreditDeny     = "credit.deny"
	TypeCreditBalance  = "credit.balance"
	TypeCreditReward   = "credit.reward"
	TypeCreditAdjust   = "credit.adjust"

	TypeMentorRequest  = "mentor.request"
	TypeMentorFeedback = "mentor.feedback"
	TypeMentorRegister = "mentor.register"
	TypeMentorReport   = "mentor.report"

	TypeAuthRequest  = "auth.request"
	TypeAuthResponse = "auth.response"
	TypeKeyRotate    = "key.rotate"
	TypeZoneJoin     = "zone.join"
	TypeZoneConfirm  = "zone.confirm"
	TypeZoneDeny     = "zone.deny"
	TypeZoneLeave    = "zone.leave"

	TypeAck   = "ack"
	TypeError = "error"

	TypeShutdownRequest      = "shutdown.request"
	TypeShutdownResponse     = "shutdown.response"
	TypePlanApproval         = "plan.approval"
	TypePlanApprovalResponse = "plan.approval.response"
)

// Groups a TYPE belongs to. They follow the chapters of the reference, plus
// "handshake" for the request/response pairs of AGLX-NOTES.md section 3.
const (
	GroupTask      = "task"
	GroupRegistry  = "registry"
	GroupCredit    = "credit"
	GroupMentor    = "mentor"
	GroupSecurity  = "security"
	GroupHandshake = "handshake"
	GroupGeneric   = "generic"
)

// TypeInfo is what the node knows about one TYPE before it reads a body: how
// to route it and which transport may carry it. (Which Go type holds its
// payload is Parse's business: Message.Payload.)
type TypeInfo struct {
	// Name is the TYPE exactly as it appears on the wire.
	Name string
	// Group is one of the Group constants.
	Group string
	// UDP is set for the one TYPE that may arrive as a datagram
	// (agent.announce). Everything else must come over TCP, where a frame is
	// answered and its sender is a connection, not a spoofable address.
	UDP bool
	// Security is set for auth.*, key.rotate and zone.*: the reference asks
	// for TLS or equivalent encryption on these, so the bridge may refuse
	// them on a plain connection.
	Security bool
	// NoReply is set for ack and error: they are recorded but never answered,
	// so that two nodes cannot answer each other's answers forever.
	NoReply bool
}

// knownTypes is the registry, indexed by TYPE, and newPayload the zero
// payload of each TYPE for Parse to decode into. Both are filled once at
// package initialisation and never written afterwards, so reading them needs
// no lock. The constructor is kept out of TypeInfo so that TypeInfo stays a
// plain, comparable value.
var (
	knownTypes = map[string]TypeInfo{}
	newPayload = map[string]func() Payload{}
)

func init() {
	add := func(name, group string, payload func() Payload) {
		if _, dup := knownTypes[name]; dup {
			panic("protocol: TYPE " + name + " registered twice")
		}
		knownTypes[name] = TypeInfo{
			Name:     name,
			Group:    group,
			UDP:      name == TypeAgentAnnounce,
			Security: group == GroupSecurity,
			NoReply:  name == TypeAck || name == TypeError,
		}
		newPayload[name] = payload
	}
	add(TypeTaskAssign, GroupTask, func() Payload { return new(TaskAssign) })
	add(TypeTaskResult, GroupTask, func() Payload { return new(TaskResult) })
	add(TypeTaskReject, GroupTask, func() Payload { return new(TaskReject) })
	add(TypeTaskRetry, GroupTask, func() Payload { return new(TaskRetry) })
	add(TypeTaskCancel, GroupTask, func() Payload { return new(TaskCancel) })

	add(TypeRegistryUpdate, GroupRegistry, func() Payload { return new(RegistryUpdate) })
	add(TypeRegistryAck, GroupRegistry, func() Payload { return new(RegistryAck) })
	add(TypeRegistryFetch, GroupRegistry, func() Payload { return new(RegistryFetch) })
	add(TypeRegistryList, GroupRegistry, func() Payload { return new(RegistryList) })
	add(TypeRegistrySync, GroupRegistry, func() Payload { return new(RegistrySync) })
	add(TypeRegistryExchange, GroupRegistry, func() Payload { return new(RegistryExchange) })
	add(TypeAgentAnnounce, GroupRegistry, func() Payload { return new(AgentAnnounce) })

	add(TypeCreditTransfer, GroupCredit, func() Payload { return new(CreditTransfer) })
	add(TypeCreditReceived, GroupCredit, func() Payload { return new(CreditReceived) })
	add(TypeCreditRequest, GroupCredit, func() Payload { return new(CreditRequest) })
	add(TypeCreditApprove, GroupCredit, func() Payload { return new(CreditApprove) })
	add(TypeCreditDeny, GroupCredit, func() Payload { return new(CreditDeny) })
	add(TypeCreditBalance, GroupCredit, func() Payload { return new(CreditBalance) })
	add(TypeCreditReward, GroupCredit, func() Payload { return new(CreditReward) })
	add(TypeCreditAdjust, GroupCredit, func() Payload { return new(CreditAdjust) })

	add(TypeMentorRequest, GroupMentor, func() Payload { return new(MentorRequest) })
	add(TypeMentorFeedback, GroupMentor, func() Payload { return new(MentorFeedback) })
	add(TypeMentorRegister, GroupMentor, func() Payload { return new(MentorRegister) })
	add(TypeMentorReport, GroupMentor, func() Payload { return new(MentorReport) })

	add(TypeAuthRequest, GroupSecurity, func() Payload { return new(AuthRequest) })
	add(TypeAuthResponse, GroupSecurity, func() Payload { return new(AuthResponse) })
	add(TypeKeyRotate, GroupSecurity, func() Payload { return new(KeyRotate) })
	add(TypeZoneJoin, GroupSecurity, func() Payload { return new(ZoneJoin) })
	add(TypeZoneConfirm, GroupSecurity, func() Payload { return new(ZoneConfirm) })
	add(TypeZoneDeny, GroupSecurity, func() Payload { return new(ZoneDeny) })
	add(TypeZoneLeave, GroupSecurity, func() Payload { return new(ZoneLeave) })

	add(TypeAck, GroupGeneric, func() Payload { return new(Ack) })
	add(TypeError, GroupGeneric, func() Payload { return new(ErrorPayload) })

	add(TypeShutdownRequest, GroupHandshake, func() Payload { return new(ShutdownRequest) })
	add(TypeShutdownResponse, GroupHandshake, func() Payload { return new(ShutdownResponse) })
	add(TypePlanApproval, GroupHandshake, func() Payload { return new(PlanApproval) })
	add(TypePlanApprovalResponse, GroupHandshake, func() Payload { return new(PlanApprovalResponse) })
}

// Lookup returns what the node knows about TYPE typ.
//
// Matching is exact: a TYPE is a case-sensitive identifier, always lower case
// on the wire, so "Task.Assign" is unknown. Folding case here would let two
// spellings of one TYPE reach handlers, logs and signatures (the signing input
// holds the TYPE as sent) and make them disagree about what was received.
func Lookup(typ string) (TypeInfo, bool) {
	info, ok := knownTypes[typ]
	return info, ok
}

// Types returns every known TYPE, sorted by name, so that listings, tests and
// documentation generated from it are the same on every run.
func Types() []TypeInfo {
	out := make([]TypeInfo, 0, len(knownTypes))
	for _, info := range knownTypes {
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NearestType is the known TYPE within two edits (a letter added, left
// out, changed, or two swapped) of typ, for a refusal to suggest: a typo
// such as "task.asign" otherwise gets only "unknown TYPE". It reports
// false when none is that near, or when two are equally near. typ is
// bounded by the header line limit, and the TYPEs are few.
func NearestType(typ string) (string, bool) {
	const near = 2 // edits
	best, bestD, tie := "", near+1, false
	for _, info := range Types() {
		d := editDistance(typ, info.Name, near)
		switch {
		case d < bestD:
			best, bestD, tie = info.Name, d, false
		case d == bestD:
			tie = true
		}
	}
	return best, bestD <= near && !tie
}

// editDistance is the optimal string alignment distance between a and b
// (insertions, deletions, substitutions and swaps of neighbours), or more
// than limit as soon as it must be.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
