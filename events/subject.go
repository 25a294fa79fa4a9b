package events

import (
	"fmt"
	"strings"
)

// Subjects. Every event is stored under
//
//	aglx.ev.<group>.<name>.<from>.<to>
//
// <group>.<name> is the TYPE split at its first dot, with later dots turned
// into '_' (plan.approval.response -> plan.approval_response; a TYPE without a
// dot gets the name "_": ack -> ack._). Known TYPEs hold no '_', so the split
// is reversible. <from> and <to> are URI tokens (see URIToken); <to> is "none"
// for a broadcast. A consumer filters with NATS wildcards:
//
//	aglx.ev.credit.>                 every credit message
//	aglx.ev.credit.transfer.>        one TYPE
//	aglx.ev.*.*.agent~alpha_local.*  everything alpha sent
//	aglx.ev.*.*.*.agent~alpha_local  everything addressed to alpha
const (
	SubjectPrefix = "aglx.ev"
	// NoRecipient is the <to> token of a message without TO. It holds no '~',
	// so no URI token can equal it.
	NoRecipient = "none"
)

// Subject returns the subject an event of this TYPE, sender and recipient is
// stored under. It is built in one allocation: every publish and every
// event read (Read checks that an event is on its own subject) makes one.
func Subject(typ, from, to string) string {
	var b strings.Builder
	b.Grow(len(SubjectPrefix) + len(typ) + 3*(len(from)+len(to)) + 16) // escaping triples a byte at most
	b.WriteString(SubjectPrefix)
	b.WriteByte('.')
	writeTypeTokens(&b, typ)
	b.WriteByte('.')
	writeURIToken(&b, from)
	b.WriteByte('.')
	if to == "" {
		b.WriteString(NoRecipient)
	} else {
		writeURIToken(&b, to)
	}
	return b.String()
}

// TypeTokens returns the two subject tokens of a TYPE: "group.name".
func TypeTokens(typ string) string {
	var b strings.Builder
	b.Grow(len(typ) + 2)
	writeTypeTokens(&b, typ)
	return b.String()
}

func writeTypeTokens(b *strings.Builder, typ string) {
	group, name, ok := strings.Cut(typ, ".")
	b.WriteString(group)
	b.WriteByte('.')
	if !ok || name == "" {
		b.WriteByte('_')
		return
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '.' {
			b.WriteByte('_')
		} else {
			b.WriteByte(c)
		}
	}
}

// URIToken encodes an AGLX URI as one subject token. The mapping is
// injective, so two different URIs never share a token, and readable:
//
//	agent://alpha.local  ->  agent~alpha_local
//
// "://" becomes '~' (only the first); '.' becomes '_'; letters, digits and
// '-' stay; every other byte, '_', '~' and '=' included, becomes =XX in upper
// case hex. The result never holds '.', '*', '>' or white space.
func URIToken(uri string) string {
	var b strings.Builder
	b.Grow(len(uri) + 8)
	writeURIToken(&b, uri)
	return b.String()
}

func writeURIToken(b *strings.Builder, uri string) {
	scheme, name, ok := strings.Cut(uri, "://")
	if ok {
		escapeTo(b, scheme)
		b.WriteByte('~')
	}
	escapeTo(b, name)
}

func escapeTo(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-':
			b.WriteByte(c)
		case c == '.':
			b.WriteByte('_')
		default:
			b.WriteByte('=')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		}
	}
}

// ParseURIToken reverses URIToken.
func ParseURIToken(tok string) (string, error) {
	scheme, name, ok := strings.Cut(tok, "~")
	var b strings.Builder
	if ok {
		s, err := unescape(scheme)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
		b.WriteString("://")
	} else {
		name = tok
	}
	n, err := unescape(name)
	if err != nil {
		return "", err
	}
	b.WriteString(n)
	return b.String(), nil
}

func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '_':
			b.WriteByte('.')
		case '=':
			if i+2 >= len(s) {
				return "", fmt.Errorf("subject token %q: truncated escape", s)
			}
			var v byte
			for _, h := range []byte(s[i+1 : i+3]) {
				v <<= 4
				switch {
				case h >= '0' && h <= '9':
					v |= h - '0'
				case h >= 'A' && h <= 'F':
					v |= h - 'A' + 10
				default:
					return "", fmt.Errorf("subject token %q: bad escape", s)
				}
			}
			b.WriteByte(v)
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// Filter returns the subject filter for events of a TYPE or group, from a
// sender, to a recipient; an empty argument matches anything. typ may be a
// TYPE ("credit.transfer"), a group ("credit" or "credit.*"), or "".
func Filter(typ, from, to string) string {
	t := "*.*"
	switch {
	case typ == "":
	case strings.HasSuffix(typ, ".*"):
		t = strings.TrimSuffix(typ, ".*") + ".*"
	case !strings.Contains(typ, ".") && typ != "ack" && typ != "error":
		t = typ + ".*"
	default:
		t = TypeTokens(typ)
	}
	f, r := "*", "*"
	if from != "" {
		f = URIToken(from)
	}
	if to != "" {
		r = URIToken(to)
	}
	return SubjectPrefix + "." + t + "." + f + "." + r
}

// RecipientOf reads the recipient URI from an event subject, "" for a
// broadcast.
func RecipientOf(subject string) (string, error) {
	i := strings.LastIndexByte(subject, '.')
	if i < 0 || !strings.HasPrefix(subject, SubjectPrefix+".") {
		return "", fmt.Errorf("%q is not an event subject", subject)
	}
	tok := subject[i+1:]
	if tok == NoRecipient {
		return "", nil
	}
	return ParseURIToken(tok)
}
