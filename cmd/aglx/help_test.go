package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode"
)

// runMainEnv makes the test binary run aglx's main instead of the tests,
// so that a test can run the command whole, exit status included.
const runMainEnv = "AGLX_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runAglx runs aglx with args in a process of its own and returns what it
// printed, stdout and stderr together, and its exit status.
func runAglx(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("aglx %v: %v", args, err)
	}
	return string(out), 0
}

// TestHelpHasOneForm: the commands' help came in two forms, Go's "Usage of
// aglx tail:" over the flags and a usage line of their own, one with a
// sentence of what the command does and most without. Every command's -h,
// and aglx -h, now prints the usage line, then what it does in one
// sentence, then what it takes, and exits 0. A command without flags
// (aglx version) says so by leaving out [flags] and the flags' list.
func TestHelpHasOneForm(t *testing.T) {
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			out, code := runAglx(t, c.name, "-h")
			lines := strings.Split(out, "\n")
			// Read from the command, not from what it printed: a command
			// that stopped printing its flags would otherwise pass as one
			// without any (helper-101).
			flagged := c.name != "version"
			want := "usage: aglx " + c.name
			if flagged {
				want += " [flags]"
			}
			if c.args != "" {
				want += " " + c.args
			}
			ok := code == 0 && len(lines) >= 3 && lines[0] == want && isSentence(lines[1]) && strings.HasPrefix(lines[1], strings.ToUpper(c.what[:1])+c.what[1:]) && lines[2] == ""
			if flagged {
				ok = ok && len(lines) >= 5 && strings.HasPrefix(lines[4], "  -")
			} else {
				ok = ok && len(lines) == 3
			}
			if !ok {
				t.Fatalf("aglx %s -h, exit %d:\n%s\nwant %q, then %q as a sentence, then the flags if any", c.name, code, out, want, c.what)
			}
			if again, code := runAglx(t, "help", c.name); code != 0 || again != out {
				t.Fatalf("aglx help %s, exit %d:\n%s\nwant what aglx %s -h prints", c.name, code, again, c.name)
			}
		})
	}
	out, code := runAglx(t, "-h")
	lines := strings.Split(out, "\n")
	if code != 0 || len(lines) < 4 || lines[0] != "usage: aglx COMMAND [flags]" || !isSentence(lines[1]) || lines[2] != "" || lines[3] != "commands:" {
		t.Fatalf("aglx -h, exit %d:\n%s", code, out)
	}
	for _, c := range commands {
		if !strings.Contains(out, "\n  "+strings.TrimSpace(c.name+" "+c.args)+"   ") || !strings.Contains(out, c.what+"\n") {
			t.Errorf("aglx -h does not list %s as %q", c.name, c.what)
		}
	}
}

// isSentence says whether s is one sentence: a capital first, a full stop
// last, and none between.
func isSentence(s string) bool {
	return s != "" && unicode.IsUpper([]rune(s)[0]) && strings.HasSuffix(s, ".") && !strings.Contains(strings.TrimSuffix(s, "."), ". ")
}
