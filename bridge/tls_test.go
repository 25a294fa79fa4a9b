package bridge

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSelfSignedPairIsRemadeWhenItDoesNotMatch: a crash between writing
// the node's key and its certificate leaves a pair that does not load;
// the next start makes a new pair instead of failing every time.
func TestSelfSignedPairIsRemadeWhenItDoesNotMatch(t *testing.T) {
	dir := t.TempDir()
	_, first, err := TLSConfig("", "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, _, err := TLSConfig("", "", other, nil); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(other, "key.pem"))
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), key, 0o600); err != nil { // the new key, the old certificate
		t.Fatal(err)
	}
	_, again, err := TLSConfig("", "", dir, nil)
	if err != nil || again == first {
		t.Fatalf("TLSConfig over a mismatched pair = %q, %v; want a new certificate", again, err)
	}
}
