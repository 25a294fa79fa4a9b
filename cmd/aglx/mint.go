package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aglx/ledger/bridge"
	"github.com/aglx/ledger/protocol"
	"github.com/oklog/ulid/v2"
)

// mintUnknown is aglx mint's exit status when whether the mint was
// booked is not known: it was recorded but the ledger's verdict did not
// come in time, or it was sent and no answer, or a 5xx, came back (the
// store may have taken it after all). Run it again with its --tx-id.
const mintUnknown = 3

// runMint issues credits: a credit.transfer from the node's own URI, signed
// with the node's key, which the ledger books against the issuance account.
// It asks the node's HTTP API for its name and checks that the key file is
// the node's key before it sends anything.
func runMint(args []string, stdout io.Writer) error {
	fs := newFlagSet("mint")
	to := fs.String("to", "", "the account to credit, e.g. agent://worker05.local")
	amount := fs.String("amount", "", "how many credits, as an exact decimal (e.g. 100 or 0.5)")
	reason := fs.String("reason", "issuance", "the reason recorded with the transfer")
	keyPath := fs.String("key", "aglx-data/keys/node.key", "the node's key file")
	addr := fs.String("addr", bridge.DefaultTCPAddr, "the node's AGLX TCP address")
	api := fs.String("http", "http://"+bridge.DefaultHTTPAddr, "the node's HTTP API")
	timeout := fs.Duration("timeout", 30*time.Second, "give up waiting for the node's answer after this long (exit 3: run again with the --tx-id printed)")
	txID := fs.String("tx-id", "", "the mint's transaction_id (default: a new one, printed); run again with the same one after a lost reply, and the ledger books it once")
	if stop, err := parseFlags(fs, args); stop {
		return err
	}
	if fs.NArg() > 0 {
		// --reason my reason recorded "my" and dropped the rest (helper-88).
		fmt.Fprintf(fs.Output(), "aglx mint: unexpected %q: quote a --reason of several words\n", fs.Arg(0))
		return exitCode(2)
	}
	if *to == "" || *amount == "" {
		return errors.New("--to and --amount are required")
	}
	if u, err := protocol.ParseURI(*to); err != nil {
		return fmt.Errorf("--to: %w", err)
	} else {
		*to = u.String()
	}
	a, err := protocol.ParseAmount(*amount)
	if err != nil {
		// Checked here, not by the node: no status to report.
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return fmt.Errorf("--amount: %s", pe.Reason)
		}
		return fmt.Errorf("--amount: %w", err)
	}
	if a.Decimal().Sign() <= 0 {
		return fmt.Errorf("--amount %s: a mint credits more than 0", *amount)
	}
	// Written out in plain digits (1e3 is 1000), keeping its decimals.
	*amount = a.Decimal().Text('f')
	key, err := loadNodeKey(*keyPath)
	if err != nil {
		return err
	}
	var node bridge.NodeInfo
	if err := getJSON(*api, "/v1/node", &node); err != nil {
		return fmt.Errorf("asking the node its name: %w", err)
	}
	if id := protocol.KeyID(key.Public()); id != node.KeyID {
		return fmt.Errorf("%s is not the key of %s (key id %s, the node's is %s)", *keyPath, node.Name, id, node.KeyID)
	}
	// Every run made a new transaction_id, so running a mint again after a
	// lost reply minted twice (helper-69). The id is printed first, and
	// --tx-id sends the same mint again, which the ledger books once.
	id := *txID
	if id == "" {
		id = "mint-" + ulid.Make().String()
	}
	fmt.Fprintf(stdout, "minting %s to %s as transaction %s (after a lost reply, run again with --tx-id %s)\n", *amount, *to, id, id)
	body := mintBody(*amount, *reason, time.Now().UTC().Format(time.RFC3339), id)
	f := &protocol.Frame{Transport: protocol.TransportTCP, Body: body, Headers: []protocol.Header{
		{Name: protocol.HeaderFrom, Value: node.Name},
		{Name: protocol.HeaderTo, Value: *to},
		{Name: protocol.HeaderType, Value: protocol.TypeCreditTransfer},
		{Name: protocol.HeaderID, Value: ulid.Make().String()},
		{Name: protocol.HeaderContentType, Value: "application/json"},
	}}
	if err := protocol.SignFrame(key, f); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c, err := bridge.Dial(ctx, *addr)
	if err != nil {
		// As aglx send says it: a bare "connection refused" left the
		// operator to guess which flag names the node (helper-106).
		return fmt.Errorf("%w (is a node serving AGLX at %s? --addr names it; aglxd's --listen)", err, *addr)
	}
	defer c.Close()
	// The bound is the whole exchange's, not the dial's alone: a node that
	// took the frame and never answered held aglx mint for ever.
	if dl, ok := ctx.Deadline(); ok {
		c.Conn().SetDeadline(dl)
	}
	if err := c.WriteFrame(f); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return err
	}
	reply, err := c.ReadReply()
	if err != nil {
		// Sent, and no answer: it may be booked. Exit 1 said "refused",
		// and a script that minted again under a new id paid twice
		// (helper-89).
		fmt.Fprintf(stdout, "sent, but no answer came (%v): run again with --tx-id %s, and the ledger books it once\n", err, id)
		return exitCode(mintUnknown)
	}
	stdout.Write(protocol.Encode(reply))
	if reply.Type() == "error" {
		if strings.HasPrefix(reply.Value(protocol.HeaderStatus), "5") {
			// "may or may not be stored": the store may have taken it.
			fmt.Fprintf(stdout, "\nthe node could not say whether it stored the mint: run again with --tx-id %s, and the ledger books it once\n", id)
			return exitCode(mintUnknown)
		}
		return exitCode(1)
	}
	if strings.HasPrefix(reply.Value(protocol.HeaderStatus), "202") {
		// Recorded, but the ledger's verdict did not come in time: the
		// credit may still be refused (a limit, a figure out of range).
		fmt.Fprintf(stdout, "\nrecorded, but the ledger's answer did not come in time: see `aglx balance %s` for whether %s was credited\n", *to, *amount)
		return exitCode(mintUnknown) // not a success a script may go on from (helper-88)
	}
	// The ack's figures are the sender's: the node's issuance account,
	// which goes negative by what it has issued. Say what happened.
	var ack struct {
		Balance  string `json:"balance"`
		Replayed bool   `json:"replayed"`
	}
	json.Unmarshal(reply.Body, &ack)
	if ack.Replayed {
		// A run again with --tx-id after a lost reply: nothing new.
		fmt.Fprintf(stdout, "\nalready credited: transaction %s was booked before, and nothing was booked now; the node's issuance account %s stands at %s\n",
			id, node.Name, ack.Balance)
		return nil
	}
	fmt.Fprintf(stdout, "\ncredited %s with %s; the node's issuance account %s stands at %s (it goes negative by all it has issued)\n",
		*to, *amount, node.Name, ack.Balance)
	return nil
}

// mintBody is the credit.transfer body of a mint. amount is checked
// already; the strings are written as JSON strings, not with Go's %q,
// so that a reason with a control character or invalid UTF-8 still
// makes a valid body.
func mintBody(amount, reason, timestamp, txID string) []byte {
	quote := func(s string) []byte { b, _ := json.Marshal(s); return b }
	return fmt.Appendf(nil, `{"amount": %s, "currency": "AGLX", "reason": %s, "timestamp": %s, "transaction_id": %s}`,
		quote(amount), quote(reason), quote(timestamp), quote(txID))
}
