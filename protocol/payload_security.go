package protocol

// Security payloads: identity, keys and zones (reference chapter on
// security). The reference asks for TLS or equivalent on all of them
// (TypeInfo.Security). Signatures and public keys are checked for form only:
// the reference examples hold placeholders ("rsa-sha256:a38c4e...",
// "MIIBIjANBgkq...") that must parse here; decoding and verifying them is the
// signature verifier's job. Timestamps are required where a message proves
// identity, so that a replay window can be enforced.

// publicKeySizeMax bounds a public_key: the base64 of a DER
// SubjectPublicKeyInfo of an 8192-bit RSA key is about 1,400 bytes.
const publicKeySizeMax = 4096 // bytes

func (c *fieldCheck) publicKey(name, key string) {
	switch {
	case key == "":
		c.missing(name)
	case len(key) > publicKeySizeMax:
		c.failf("field %q is longer than %d bytes", name, publicKeySizeMax)
	case !visibleASCII(key):
		c.failf("field %q must be base64 without white space", name)
	}
}

// AuthRequest is auth.request: an agent presents its public key and proves
// it holds the private one.
type AuthRequest struct {
	AgentID   string    `json:"agent_id"`
	PublicKey string    `json:"public_key"` // base64 DER SubjectPublicKeyInfo
	Signature string    `json:"signature"`
	Timestamp Timestamp `json:"timestamp"`
}

// Validate requires all four fields: without the signature there is nothing
// to verify, without the timestamp nothing to stop a replay.
func (p *AuthRequest) Validate() error {
	var c fieldCheck
	c.id("agent_id", p.AgentID, true)
	c.publicKey("public_key", p.PublicKey)
	c.signature("signature", p.Signature, true, sigAlgsKey)
	c.timestamp("timestamp", p.Timestamp, true)
	return c.result()
}

// AuthResponse is auth.response: the registry's verdict on an auth.request.
type AuthResponse struct {
	// Status is the verdict, e.g. "VERIFIED".
	Status     string    `json:"status"`
	TrustLevel string    `json:"trust_level,omitempty"`
	Expires    Timestamp `json:"expires,omitzero"`
	Signature  string    `json:"signature,omitempty"`
}

// Validate requires status.
func (p *AuthResponse) Validate() error {
	var c fieldCheck
	c.text("status", p.Status)
	c.signature("signature", p.Signature, false, sigAlgsKey)
	return c.result()
}

// KeyRotate is key.rotate: an agent replaces its key. The message must be
// signed with the old key, which the verifier checks.
type KeyRotate struct {
	OldKeyID       string    `json:"old_key_id"`
	NewKeyID       string    `json:"new_key_id"`
	PublicKey      string    `json:"public_key"`
	RotationReason string    `json:"rotation_reason,omitempty"`
	Timestamp      Timestamp `json:"timestamp"`
	Signature      string    `json:"signature,omitempty"`
}

// Validate requires both key ids, distinct, the new public_key and
// timestamp.
func (p *KeyRotate) Validate() error {
	var c fieldCheck
	c.id("old_key_id", p.OldKeyID, true)
	c.id("new_key_id", p.NewKeyID, true)
	if p.OldKeyID != "" && p.OldKeyID == p.NewKeyID {
		c.failf("field %q must differ from %q", "new_key_id", "old_key_id")
	}
	c.publicKey("public_key", p.PublicKey)
	c.timestamp("timestamp", p.Timestamp, true)
	c.signature("signature", p.Signature, false, sigAlgsKey)
	return c.result()
}

// ZoneJoin is zone.join: an agent asks to enter a zone, proving it knows the
// zone's secret with an hmac-sha256 signature.
type ZoneJoin struct {
	ZoneID       string    `json:"zone_id"`
	AgentID      string    `json:"agent_id"`
	Signature    string    `json:"signature"`
	Capabilities []string  `json:"capabilities,omitempty"`
	Timestamp    Timestamp `json:"timestamp"`
}

// Validate requires zone_id, agent_id, an hmac-sha256 signature and
// timestamp. Only zone.join uses hmac-sha256, and it uses nothing else.
func (p *ZoneJoin) Validate() error {
	var c fieldCheck
	c.id("zone_id", p.ZoneID, true)
	c.id("agent_id", p.AgentID, true)
	c.signature("signature", p.Signature, true, sigAlgsZone)
	c.words("capabilities", p.Capabilities, false)
	c.timestamp("timestamp", p.Timestamp, true)
	return c.result()
}

// ZoneConfirm is zone.confirm: the agent is in the zone until Expires.
type ZoneConfirm struct {
	ZoneID       string    `json:"zone_id"`
	SessionToken string    `json:"session_token"`
	Role         string    `json:"role,omitempty"`
	Expires      Timestamp `json:"expires,omitzero"`
}

// Validate requires zone_id and session_token.
func (p *ZoneConfirm) Validate() error {
	var c fieldCheck
	c.id("zone_id", p.ZoneID, true)
	c.id("session_token", p.SessionToken, true)
	return c.result()
}

// ZoneDeny is zone.deny: the agent may not enter the zone.
type ZoneDeny struct {
	ZoneID    string    `json:"zone_id"`
	Reason    string    `json:"reason"`
	Timestamp Timestamp `json:"timestamp,omitzero"`
}

// Validate requires zone_id and reason.
func (p *ZoneDeny) Validate() error {
	var c fieldCheck
	c.id("zone_id", p.ZoneID, true)
	c.text("reason", p.Reason)
	return c.result()
}

// ZoneLeave is zone.leave: the agent leaves a zone.
type ZoneLeave struct {
	ZoneID    string    `json:"zone_id"`
	Reason    string    `json:"reason,omitempty"`
	Timestamp Timestamp `json:"timestamp,omitzero"`
}

// Validate requires zone_id.
func (p *ZoneLeave) Validate() error {
	var c fieldCheck
	c.id("zone_id", p.ZoneID, true)
	return c.result()
}
