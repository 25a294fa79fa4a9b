package protocol

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// batchTestChecks builds one of every kind of check VerifyBatch meets: good
// and spoilt Ed25519 and RSA signatures, a key of the wrong kind, no key,
// no signature, and a body that is not JSON.
func batchTestChecks(t *testing.T) map[string]SigCheck {
	ed := testEd25519Key()
	other := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	edBody := signedTestBody(t, ed)
	rsaBody := signedTestBody(t, testRSAKey())
	edSig, _, _ := SignatureOf(edBody)
	rsaSig, _, _ := SignatureOf(rsaBody)
	check := func(key crypto.PublicKey, body []byte) SigCheck {
		return SigCheck{Key: key, From: testFrom, To: testTo, Type: testType, Body: body}
	}
	edPub, rsaPub := ed.Public(), testRSAKey().Public()
	return map[string]SigCheck{
		"ed25519":                     check(edPub, edBody),
		"ed25519 other key":           check(other.Public(), signedTestBody(t, other)),
		"ed25519 spoilt":              check(edPub, []byte(flipLastHexDigit(string(edBody), edSig))),
		"ed25519 under the other key": check(other.Public(), edBody),
		"ed25519 other TO":            {Key: edPub, From: testFrom, To: "agent://x.local", Type: testType, Body: edBody},
		"ed25519 CREDITS added":       {Key: edPub, From: testFrom, To: testTo, Type: testType, Credits: "98", Body: edBody},
		"rsa":                         check(rsaPub, rsaBody),
		"rsa spoilt":                  check(rsaPub, []byte(flipLastHexDigit(string(rsaBody), rsaSig))),
		"rsa body, ed25519 key":       check(edPub, rsaBody),
		"no key":                      check(nil, edBody),
		"unsigned":                    check(edPub, []byte(testBody)),
		"not JSON":                    check(edPub, []byte(`{"amount":`)),
	}
}

// TestVerifyBatchMatchesVerify: whatever mix of checks VerifyBatch gets, in
// whatever order and number (across several Ed25519 batches), each result
// is exactly what Verify returns for it alone, refusal text included.
func TestVerifyBatchMatchesVerify(t *testing.T) {
	kinds := batchTestChecks(t)
	names := make([]string, 0, len(kinds))
	want := map[string]error{}
	for name, c := range kinds {
		names = append(names, name)
		want[name] = Verify(c.Key, c.From, c.To, c.Type, c.Credits, c.Body)
	}
	if want["ed25519"] != nil || want["rsa"] != nil || want["ed25519 spoilt"] == nil || want["ed25519 CREDITS added"] == nil {
		t.Fatalf("the test's checks are not what they say: %v", want)
	}
	rapid.Check(t, func(rt *rapid.T) {
		picked := rapid.SliceOfN(rapid.SampledFrom(names), 0, 3*ed25519BatchMax).Draw(rt, "checks")
		checks := make([]SigCheck, len(picked))
		for i, name := range picked {
			checks[i] = kinds[name]
		}
		errs := make([]error, len(checks))
		new(SigBatcher).VerifyBatch(checks, errs)
		for i, name := range picked {
			if !reflect.DeepEqual(errs[i], want[name]) {
				rt.Fatalf("check %d (%s): VerifyBatch says %v, Verify %v", i, name, errs[i], want[name])
			}
		}
	})
}

// BenchmarkVerifyBatch is the cost per signed transfer of VerifyBatch at
// several batch sizes, 64 keys, against Verify one by one.
func BenchmarkVerifyBatch(b *testing.B) {
	checks := make([]SigCheck, 4*ed25519BatchMax)
	for i := range checks {
		var seed [ed25519.SeedSize]byte
		seed[0] = byte(i % 64)
		key := ed25519.NewKeyFromSeed(seed[:])
		body := []byte(fmt.Sprintf(`{"amount":"%d.50","currency":"AGLX","timestamp":"2026-11-30T12:00:00Z","transaction_id":"tx-%d"}`, i, i))
		sig, err := Sign(key, testFrom, testTo, testType, "", body)
		if err != nil {
			b.Fatal(err)
		}
		if body, err = SetSignature(body, sig); err != nil {
			b.Fatal(err)
		}
		checks[i] = SigCheck{Key: key.Public(), From: testFrom, To: testTo, Type: testType, Body: body}
	}
	b.Run("one by one", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			c := checks[i%len(checks)]
			if err := Verify(c.Key, c.From, c.To, c.Type, c.Credits, c.Body); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{4, 8, 32, ed25519BatchMax} {
		b.Run(fmt.Sprintf("batch of %d", n), func(b *testing.B) {
			errs := make([]error, n)
			for i := 0; b.Loop(); i++ {
				at := (i * n) % (len(checks) - n)
				new(SigBatcher).VerifyBatch(checks[at:at+n], errs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n)/1e3, "µs/signature")
		})
	}
	// The price of a bad signature: one in every batch makes the batch
	// fail, and every signature in it is then checked alone. A fresh
	// batcher each time shows that price; one batcher throughout shows it
	// with the pause after each failure (ed25519BatchPause).
	for _, n := range []int{4, 8, 32, ed25519BatchMax} {
		for _, kept := range []bool{false, true} {
			name := fmt.Sprintf("batch of %d with one bad", n)
			if kept {
				name += ", one batcher"
			}
			b.Run(name, func(b *testing.B) {
				spoilt := slices.Clone(checks)
				for at := 0; at+n <= len(spoilt); at += n {
					// Change the low byte of S: the signature still decodes
					// (R a point, S canonical), so only the equation fails,
					// after the batch's arithmetic.
					c := spoilt[at]
					c.Body = slices.Clone(c.Body)
					i := bytes.Index(c.Body, []byte(`ed25519:`)) + len(`ed25519:`) + 64
					c.Body[i] = "1032547698badcfe"[strings.IndexByte("0123456789abcdef", c.Body[i])]
					spoilt[at] = c
				}
				errs := make([]error, n)
				batcher := new(SigBatcher)
				for i := 0; b.Loop(); i++ {
					if !kept {
						batcher = new(SigBatcher)
					}
					at := (i * n) % (len(spoilt) - len(spoilt)%n - n + 1) / n * n
					batcher.VerifyBatch(spoilt[at:at+n], errs)
					if errs[0] == nil {
						b.Fatal("the spoilt signature verified")
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n)/1e3, "µs/signature")
			})
		}
	}
}
