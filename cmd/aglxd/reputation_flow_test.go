package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aglx/ledger/protocol"
)

// TestReputationOverTheWire: on a real node, a mentee that binds a key
// and asks a registered mentor for advice, with signed frames over TLS
// and TCP, has its score moved by the mentor's signed feedback;
// /v1/reputation shows the exact score, and a restart, which folds the
// log again, shows the same.
func TestReputationOverTheWire(t *testing.T) {
	dir := t.TempDir()
	m := rfStartNode(t, dir, "")
	node := m.cfg.Name
	sec := dialTLS(t, m)
	const mentor, mentee = "agent://mentor01.local", "agent://worker07.local"
	mentorKey, menteeKey := rfNewKey(t, protocol.KeyEd25519), rfNewKey(t, protocol.KeyEd25519)
	for _, a := range []struct {
		uri string
		k   crypto.Signer
	}{{mentor, mentorKey}, {mentee, menteeKey}} {
		reply, _ := rfSend(t, sec, rfSign(t, a.k, rfFrame(a.uri, node, protocol.TypeAuthRequest,
			fmt.Sprintf(`{"agent_id":%q,"public_key":%q,"timestamp":%q}`, a.uri, rfPub(a.k), rfStamp(0)))))
		rfWant(t, "auth.request of "+a.uri, reply, protocol.TypeAuthResponse, 200)
	}
	reply, _ := rfSend(t, sec, rfSign(t, mentorKey, rfFrame(mentor, node, protocol.TypeMentorRegister,
		fmt.Sprintf(`{"agent_name":"Mentor01","expertise":["nlp"],"available":true,"timestamp":%q}`, rfStamp(0)))))
	rfWant(t, "mentor.register", reply, "ack", 200)
	reply, _ = rfSend(t, sec, rfSign(t, menteeKey, rfFrame(mentee, mentor, protocol.TypeMentorRequest,
		fmt.Sprintf(`{"task_id":"b9e4","context":"data.analyze","timestamp":%q}`, rfStamp(0)))))
	rfWant(t, "mentor.request", reply, "ack", 202)
	reply, ack := rfSend(t, sec, rfSign(t, mentorKey, rfFrame(mentor, mentee, protocol.TypeMentorFeedback,
		fmt.Sprintf(`{"score":0.93,"comment":"consider parallel batching","reputation_delta":0.25,"timestamp":%q}`, rfStamp(0)))))
	rfWant(t, "mentor.feedback", reply, "ack", 202)

	path := "/v1/reputation/" + lfAPIPath(mentee)
	var rep struct {
		Score           json.Number `json:"score"`
		ScoreMillionths int64       `json:"score_millionths"`
		Rated           bool        `json:"rated"`
		Ratings         int         `json:"ratings"`
	}
	b := lfGet(t, m, path, ack.Seq)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	// 0.5 + 0.25 x 0.5 (the mentor's own score) x 0.5 (the room left).
	if rep.Score != "0.5625" || rep.ScoreMillionths != 562_500 || !rep.Rated || rep.Ratings != 1 {
		t.Fatalf("GET %s: %s", path, b)
	}
	m.Close(context.Background())
	m = rfStartNode(t, dir, "")
	if again := lfGet(t, m, path, ack.Seq); !bytes.Equal(again, b) {
		t.Fatalf("after a restart:\n%s\nbefore:\n%s", again, b)
	}
}
