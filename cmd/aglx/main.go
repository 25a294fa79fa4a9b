// Command aglx is the operator's and developer's client for an AGLX node:
// it sends frames, follows the event log, and asks the node's state. Run
// `aglx -h` for its commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/aglx/ledger/bridge"
)

// command is one of aglx's commands as its help shows it: args are its
// arguments after the flags, what is what it does, the sentence both
// `aglx -h` and its own -h print, and more, if any, what only its own -h
// adds to that sentence.
type command struct{ name, args, what, more string }

// commands are aglx's commands, in the order `aglx -h` lists them.
var commands = []command{
	{"send", "[FILE...]", "send AGLX frames from files or stdin to a node and print the replies", "with no FILE, read stdin"},
	{"tail", "", "follow the node's event log, filtered by TYPE or agent", ""},
	{"bench", "", "measure durable ingest against raw JetStream, in one run", ""},
	{"keygen", "", "make an agent key pair (Ed25519 or RSA)", ""},
	{"sign", "[FILE...]", "sign frames with a key and print them",
		`a JSON body without a "timestamp" gets the current time first, since the node refuses signed messages without one; with no FILE, read stdin`},
	{"mint", "", "issue credits to an account (signed with the node's key)", ""},
	{"balance", "URI", "print an account's figures", ""},
	{"history", "URI", "print an account's postings with running balances", ""},
	{"audit", "", "fold the ledger again from the log and check every figure", ""},
	{"agents", "", "list the registry's agents", ""},
	{"agent", "URI", "show one agent: its entry, keys, zones and status history", ""},
	{"state", "[FILE...]", "print where a node's saved fold states stand and which build and inputs a start needs to take them up", "with no FILE, the states in DATA/keys; reads the files only, so the node may be stopped"},
	{"handshakes", "", "list requests between agents and what became of them (--agent URI --state pending)", ""},
	{"version", "", "print the build aglx was made from: its module version or commit, the commit's time, and the Go version", ""},
}

// usage is `aglx -h`, in the form of every command's own: the usage line,
// what it does in one sentence, then what it takes.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: aglx COMMAND [flags]\nThe operator's and developer's client for an AGLX node.\n\ncommands:\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 3, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.name+" "+c.args), c.what)
	}
	tw.Flush()
	b.WriteString("\nRun 'aglx COMMAND -h' for a command's flags.\n")
	return b.String()
}

// newFlagSet makes the flag set of the command named, whose -h prints its
// usage line, what it does in one sentence, then its flags, if it has
// any. The commands' help came in two forms (Go's "Usage of aglx tail:"
// and a usage line of their own) before they shared this.
func newFlagSet(name string) *flag.FlagSet {
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == name })
	if i < 0 {
		panic("aglx: no command " + name + " in commands") // a programmer's error: add it there
	}
	c := commands[i]
	fs := flag.NewFlagSet("aglx "+name, flag.ContinueOnError)
	fs.Usage = func() {
		sentence := c.what
		if c.more != "" {
			sentence += "; " + c.more
		}
		flags := 0
		fs.VisitAll(func(*flag.Flag) { flags++ })
		line := "aglx " + name + " " + c.args
		if flags > 0 {
			line = "aglx " + name + " [flags] " + c.args
		}
		r, n := utf8.DecodeRuneInString(sentence)
		fmt.Fprintf(fs.Output(), "usage: %s\n%c%s.\n", strings.TrimSpace(line), unicode.ToUpper(r), sentence[n:])
		if flags > 0 {
			fmt.Fprint(fs.Output(), "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage())
		os.Exit(2)
	}
	if len(os.Args) > 2 && os.Args[1] == "help" {
		// "aglx help mint" printed the general usage, not mint's
		// (helper-93): it is "aglx mint -h".
		os.Args = []string{os.Args[0], os.Args[2], "-h"}
	}
	var err error
	switch os.Args[1] {
	case "send":
		err = runSend(os.Args[2:], os.Stdin, os.Stdout)
	case "tail", "bench", "audit":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		switch os.Args[1] {
		case "tail":
			err = runTail(ctx, os.Args[2:], os.Stdout)
		case "bench":
			err = runBench(ctx, os.Args[2:], os.Stdout)
		default:
			err = runAudit(ctx, os.Args[2:], os.Stdout)
		}
	case "balance":
		err = runBalance(os.Args[2:], os.Stdout)
	case "history":
		err = runHistory(os.Args[2:], os.Stdout)
	case "agents":
		err = runAgents(os.Args[2:], os.Stdout)
	case "agent":
		err = runAgent(os.Args[2:], os.Stdout)
	case "handshakes":
		err = runHandshakes(os.Args[2:], os.Stdout)
	case "state":
		err = runState(os.Args[2:], os.Stdout)
	case "mint":
		err = runMint(os.Args[2:], os.Stdout)
	case "keygen":
		err = runKeygen(os.Args[2:], os.Stdout)
	case "sign":
		err = runSign(os.Args[2:], os.Stdin, os.Stdout)
	case "version", "--version", "-version":
		err = runVersion(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage())
		return
	default:
		fmt.Fprintf(os.Stderr, "aglx: unknown command %q\n\n%s", os.Args[1], usage())
		os.Exit(2)
	}
	if err != nil {
		if code, ok := err.(exitCode); ok {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, "aglx:", err)
		os.Exit(1)
	}
}

// parseFlags parses a subcommand's flags and says whether the command must
// stop there, and with what: nil after -h (the usage is printed), exit
// status 2 for a bad flag (the flag package has said what is wrong).
func parseFlags(fs *flag.FlagSet, args []string) (stop bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return true, exitCode(2)
	}
	return false, nil
}

// runVersion prints the build aglx was made from (bridge.Version).
func runVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("version")
	if stop, err := parseFlags(fs, args); stop {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("aglx version takes no argument, got %q", fs.Arg(0))
	}
	_, err := fmt.Fprintln(stdout, "aglx", bridge.Version())
	return err
}

// exitCode ends the program with a status and no message: the output has
// already said what happened.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }
