// Command aglx is the operator's and developer's client for an AGLX node.
//
//	aglx send [flags] [FILE...]   send frames, print the replies
//	aglx tail [flags]             follow the event log
//	aglx bench [flags]            measure ingest against raw JetStream
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: aglx COMMAND [flags]

commands:
  send [FILE...]   send AGLX frames from files or stdin to a node and print the replies
  tail             follow the node's event log, filtered by TYPE or agent
  bench            measure durable ingest against raw JetStream, in one run
  keygen           make an agent key pair (Ed25519 or RSA)
  sign [FILE...]   sign frames with a key and print them
  mint             issue credits to an account (signed with the node's key)
  balance URI      an account's figures
  history URI      an account's postings with running balances
  audit            fold the ledger again from the log and check every figure
  agents           the registry
  agent URI        one agent: entry, keys, zones, history
  handshakes       requests between agents and what became of them (--agent URI --state pending)

Run 'aglx COMMAND -h' for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
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
	case "mint":
		err = runMint(os.Args[2:], os.Stdout)
	case "keygen":
		err = runKeygen(os.Args[2:], os.Stdout)
	case "sign":
		err = runSign(os.Args[2:], os.Stdin, os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "aglx: unknown command %q\n\n%s", os.Args[1], usage)
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

// exitCode ends the program with a status and no message: the output has
// already said what happened.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }
