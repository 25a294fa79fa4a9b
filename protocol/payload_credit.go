package protocol

// Credit payloads: the economic layer (reference chapter
// "Credit-Nachrichten"). Every money field is an *Amount, read exactly; nil
// means absent. Timestamps are required on the messages that move or ask
// for credits, because the ledger's audit trail and any replay check need
// the sender's claim of when, next to the node's own clock; the reference
// gives credit.approve and credit.balance none, so only a signed one (whose
// freshness check needs it, projections) must carry one.

// Currency is the only currency of the network. A credit.transfer naming
// another is refused rather than booked, since the ledger could not tell
// what it holds.
const Currency = "AGLX"

// CreditTransfer is credit.transfer: the sender pays the addressee.
type CreditTransfer struct {
	Amount   *Amount `json:"amount"`
	Currency string  `json:"currency"`
	Reason   string  `json:"reason,omitempty"`
	// Timestamp is when the sender made the transfer.
	Timestamp Timestamp `json:"timestamp"`
	// TransactionID lets the ledger book a transfer once, however often it
	// is sent.
	TransactionID string `json:"transaction_id"`
	// Signature is checked for form only; see fieldCheck.signature.
	Signature string `json:"signature,omitempty"`
}

// Validate requires a positive amount, currency "AGLX", timestamp and
// transaction_id.
func (p *CreditTransfer) Validate() error {
	var c fieldCheck
	c.amount("amount", p.Amount, true, amountPositive)
	c.text("currency", p.Currency)
	if p.Currency != "" && p.Currency != Currency {
		c.failf("field %q holds %s; the only currency is %q", "currency", quoteValue(p.Currency), Currency)
	}
	c.timestamp("timestamp", p.Timestamp, true)
	c.id("transaction_id", p.TransactionID, true)
	c.signature("signature", p.Signature, false, sigAlgsKey)
	return c.result()
}

// CreditReceived is credit.received: the payee confirms a transfer and
// reports its new balance.
type CreditReceived struct {
	TransactionID string  `json:"transaction_id"`
	Amount        *Amount `json:"amount"`
	// Balance is the payee's balance as it sees it; informational.
	Balance   *Amount   `json:"balance,omitempty"`
	Timestamp Timestamp `json:"timestamp"`
}

// Validate requires transaction_id, a positive amount and timestamp.
func (p *CreditReceived) Validate() error {
	var c fieldCheck
	c.id("transaction_id", p.TransactionID, true)
	c.amount("amount", p.Amount, true, amountPositive)
	c.amount("balance", p.Balance, false, amountAnySign)
	c.timestamp("timestamp", p.Timestamp, true)
	return c.result()
}

// CreditRequest is credit.request: a worker asks for credits, e.g. to start
// a task; the answer is credit.approve or credit.deny.
type CreditRequest struct {
	RequestedAmount *Amount   `json:"requested_amount"`
	Purpose         string    `json:"purpose,omitempty"`
	TaskID          string    `json:"task_id,omitempty"`
	Timestamp       Timestamp `json:"timestamp"`
}

// Validate requires a positive requested_amount and timestamp.
func (p *CreditRequest) Validate() error {
	var c fieldCheck
	c.amount("requested_amount", p.RequestedAmount, true, amountPositive)
	c.id("task_id", p.TaskID, false)
	c.timestamp("timestamp", p.Timestamp, true)
	return c.result()
}

// CreditApprove is credit.approve: credits are granted until Expires.
type CreditApprove struct {
	ApprovedAmount *Amount   `json:"approved_amount"`
	TransactionID  string    `json:"transaction_id"`
	Expires        Timestamp `json:"expires,omitzero"`
}

// Validate requires a positive approved_amount and transaction_id.
func (p *CreditApprove) Validate() error {
	var c fieldCheck
	c.amount("approved_amount", p.ApprovedAmount, true, amountPositive)
	c.id("transaction_id", p.TransactionID, true)
	return c.result()
}

// CreditDeny is credit.deny: a credit.request is refused.
type CreditDeny struct {
	RequestedAmount *Amount `json:"requested_amount"`
	Reason          string  `json:"reason"`
	// Balance is the denier's balance, if it chooses to say.
	Balance   *Amount   `json:"balance,omitempty"`
	Timestamp Timestamp `json:"timestamp"`
}

// Validate requires a positive requested_amount (the reference gives no
// request id, so it is what ties the denial to the request), reason and
// timestamp.
func (p *CreditDeny) Validate() error {
	var c fieldCheck
	c.amount("requested_amount", p.RequestedAmount, true, amountPositive)
	c.text("reason", p.Reason)
	c.amount("balance", p.Balance, false, amountAnySign)
	c.timestamp("timestamp", p.Timestamp, true)
	return c.result()
}

// CreditBalance is credit.balance, sent with FROM = TO: informational.
// Without a body it reads as a question about the sender's own balance, so
// no field is required.
type CreditBalance struct {
	Balance     *Amount   `json:"balance,omitempty"`
	EarnedTotal *Amount   `json:"earned_total,omitempty"`
	SpentTotal  *Amount   `json:"spent_total,omitempty"`
	Pending     *Amount   `json:"pending,omitempty"`
	Updated     Timestamp `json:"updated,omitzero"`
}

// Claims reports whether p states any figure (or when it was updated):
// then it is the sender's claim about its account, which a ledger compares
// and records. One that states nothing is a question.
func (p *CreditBalance) Claims() bool {
	return p.Balance != nil || p.EarnedTotal != nil || p.SpentTotal != nil || p.Pending != nil || !p.Updated.IsZero()
}

// Validate checks that the totals, when given, are not negative. Balance
// may be anything a ledger can hold.
func (p *CreditBalance) Validate() error {
	var c fieldCheck
	c.amount("balance", p.Balance, false, amountAnySign)
	c.amount("earned_total", p.EarnedTotal, false, amountNotNegative)
	c.amount("spent_total", p.SpentTotal, false, amountNotNegative)
	c.amount("pending", p.Pending, false, amountNotNegative)
	return c.result()
}

// CreditReward is credit.reward: credits paid for good work, e.g. by a
// mentor.
type CreditReward struct {
	Amount    *Amount   `json:"amount"`
	Reason    string    `json:"reason,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	Timestamp Timestamp `json:"timestamp"`
}

// Validate requires a positive amount and timestamp.
func (p *CreditReward) Validate() error {
	var c fieldCheck
	c.amount("amount", p.Amount, true, amountPositive)
	c.id("task_id", p.TaskID, false)
	c.timestamp("timestamp", p.Timestamp, true)
	return c.result()
}

// CreditAdjust is credit.adjust: the registry corrects a booking. The
// adjustment may be negative (a refund of a duplicate payment) but not zero,
// which would correct nothing.
type CreditAdjust struct {
	TransactionID string    `json:"transaction_id"`
	Adjustment    *Amount   `json:"adjustment"`
	Reason        string    `json:"reason"`
	Timestamp     Timestamp `json:"timestamp"`
}

// Validate requires transaction_id, a non-zero adjustment, reason (an
// unexplained correction cannot be audited) and timestamp.
func (p *CreditAdjust) Validate() error {
	var c fieldCheck
	c.id("transaction_id", p.TransactionID, true)
	c.amount("adjustment", p.Adjustment, true, amountNotZero)
	c.text("reason", p.Reason)
	c.timestamp("timestamp", p.Timestamp, true)
	return c.result()
}
