package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	gwconfig "github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/gateway/evidence"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
	"github.com/mcp-bastion/bastion/internal/gateway/review"
)

const admitUsage = `Usage: bastion admit --config FILE --evidence DIR
       bastion admit --config FILE review list [--json]
       bastion admit --config FILE review show NAME
       bastion admit --config FILE review approve NAME --digest DIGEST [--by WHO]
       bastion admit --config FILE review reject NAME [--by WHO]
       bastion admit --config FILE review forget NAME [--by WHO]

The gateway's admission gate, for its reviewer.

--evidence DIR runs one discovery and admission of every server the
configuration names, records the verdicts in the ledger, writes the
evidence bundle into DIR (servers.json, page-trace.jsonl, admitted.json,
rejected.json, quarantined.json, review.json, shadowed.json, ledger.json,
audit.jsonl)
and exits 1 when any server failed closed (or did not settle in time). On a
bbolt ledger it needs the ledger to itself: while a gateway runs on the
same state directory, that gateway keeps the same bundle current in
<state_dir>/evidence.

review works on the ledger: through the running gateway's socket
(<state_dir>/review.sock) when one runs, so that an approval takes effect
at once; else on the ledger file, and the next start admits what was
approved.
  list      every tool, prompt, resource and template the ledger holds:
            status, reason, name, digest (the one waiting for review, or
            refused, when there is one) and the number of scanner findings
            on it
  show      one record: the descriptor waiting, the scanner's
            findings with their field paths, and for a changed descriptor
            a field-level diff against the pinned one
  approve   pins DIGEST, which must be the one waiting: what was read is
            what gets pinned
  reject    refuses the digest waiting: it stays refused under the name
            whenever it is served (a reviewer may still approve it);
            another digest is judged afresh
  forget    deletes the record of a name its server no longer lists
            (status removed), with its pin: the name, if it comes back,
            is judged as a first use. A name that holds a digest
            quarantined and never approved, or one refused, is never
            forgotten. A
            server holds at most discovery.tools + 1,000 records of a
            kind, and names approved on first use are never forgotten by
            the bound; when a server that renamed its tools has its new
            names held (ledger_full), forgetting its removed names makes
            room for them

NAME is a tool's qualified name (docs.search), or for another kind the kind,
a colon and its qualified name: prompt:docs.summarize,
resource:docs.file:///srv/a.md, template:docs.users://{id} — as review list
shows it.

--by names the reviewer in the ledger and the audit (default $USER).

Exit status: 0 done, 1 a server failed closed or a review command failed,
2 bad flags or configuration.
`

func admitCmd(ctx context.Context, args []string, e env) int {
	if slices.ContainsFunc(flagArgs(args), isHelpFlag) {
		fmt.Fprint(e.stdout, admitUsage)
		return exitOK
	}
	fs := flag.NewFlagSet("admit", flag.ContinueOnError)
	path := fs.String("config", "", "the gateway's YAML configuration")
	dir := fs.String("evidence", "", "write the evidence bundle of one discovery into DIR")
	digest := fs.String("digest", "", "the digest approved")
	by := fs.String("by", "", "the reviewer's name")
	asJSON := fs.Bool("json", false, "review list as JSON")
	fs.Usage = func() { fmt.Fprint(e.stderr, admitUsage) }
	var pos []string
	err := parseWithHint(fs, func(fs *flag.FlagSet) (err error) {
		pos, err = parseInterleaved(fs, args)
		return err
	}, e)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *path == "" {
		fmt.Fprintln(e.stderr, "bastion admit: --config FILE is required")
		return exitUsage
	}
	// Discovery starts the servers but authenticates no caller: the
	// HTTP callers' tokens need not be set.
	load := gwconfig.LoadWithoutCallers
	if *dir == "" {
		// Review starts no server and authenticates no caller: the
		// credentials the configuration refers to need not be in the
		// reviewer's environment.
		load = gwconfig.LoadOffline
	}
	cfg, err := load(*path, lookupIn(e.environ))
	if err != nil {
		fmt.Fprintln(e.stderr, "bastion admit: invalid configuration:")
		for _, line := range splitJoined(err) {
			fmt.Fprintf(e.stderr, "  %s\n", line)
		}
		return exitUsage
	}
	switch {
	case *dir != "" && len(pos) == 0:
		return admitEvidence(ctx, cfg, *dir, e)
	case *dir == "" && len(pos) >= 2 && pos[0] == "review":
		who := *by
		if who == "" {
			who, _ = lookupIn(e.environ)("USER")
		}
		return admitReview(ctx, cfg, pos[1:], *digest, who, *asJSON, e)
	}
	fmt.Fprint(e.stderr, admitUsage)
	return exitUsage
}

// parseInterleaved parses flags wherever they stand among the positional
// arguments (review approve NAME --digest D).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// admitEvidence is one discovery and admission, and its bundle.
func admitEvidence(ctx context.Context, cfg *gwconfig.Config, dir string, e env) int {
	store, err := openLedger(ctx, cfg, e.environ)
	if errors.Is(err, ledger.ErrLocked) {
		fmt.Fprintf(e.stderr, "bastion admit: a gateway runs on this state directory; its evidence is kept current in %s\n", cfg.EvidenceDir())
		return exitFailure
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion admit: %v\n", err)
		return exitFailure
	}
	defer store.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintf(e.stderr, "bastion admit: %v\n", err)
		return exitFailure
	}
	// The run's own audit: this run's events, not the gateway's.
	auditPath := filepath.Join(dir, "audit.jsonl")
	if err := os.Remove(auditPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(e.stderr, "bastion admit: %v\n", err)
		return exitFailure
	}
	sink, err := audit.Open(auditPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion admit: %v\n", err)
		return exitFailure
	}
	defer sink.Close()
	log := gatewayLogger(cfg, e.stderr)
	g := gateway.New(cfg, log)
	g.Authorize(nil, true, sink) // no caller: nothing is called
	g.UseLedger(store)
	g.Start()
	// Every server settles — discovered or failed closed — within its
	// connection attempts and the list timeout; past that it counts as
	// failed closed.
	deadline := time.Now().Add(cfg.Discovery.ListTimeout.D() + 30*time.Second)
	for !g.Ready() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	b, err := g.Evidence(ctx)
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = g.Close(cctx)
	if err == nil {
		err = evidence.Write(dir, b)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion admit: %v\n", err)
		return exitFailure
	}
	held := map[string]map[admit.Status]int{}
	for _, r := range b.Records {
		if held[r.Server] == nil {
			held[r.Server] = map[admit.Status]int{}
		}
		held[r.Server][r.Status]++
	}
	rejected := map[string]int{}
	for _, r := range b.Snapshot.Rejected {
		rejected[r.Server]++
	}
	for _, s := range b.Servers {
		h := held[s.Name]
		fmt.Fprintf(e.stderr, "%s: %s; %d admitted, %d pending review, %d quarantined, %d rejected by review, %d removed, %d rejected\n",
			s.Name, s.Outcome, h[admit.Admitted], h[admit.Pending], h[admit.Quarantined], h[admit.Rejected], h[admit.Removed], rejected[s.Name])
	}
	fmt.Fprintf(e.stderr, "bastion admit: evidence written to %s\n", dir)
	if b.FailedClosed() {
		return exitFailure
	}
	return exitOK
}

// admitReview runs one review command.
func admitReview(ctx context.Context, cfg *gwconfig.Config, args []string, digest, by string, asJSON bool, e env) int {
	svc, done, err := reviewService(ctx, cfg, e.environ)
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion admit: %v\n", err)
		return exitFailure
	}
	defer done()
	fail := func(err error) int {
		if errors.Is(err, review.ErrNotFound) && len(args) > 1 {
			// Say which name, and how names are written: a reviewer
			// who typed the downstream's own name is told the form.
			fmt.Fprintf(e.stderr, "bastion admit: %s: the ledger holds no such name; names are qualified, <server>.<tool> (or kind:<server>.<name>), as review list shows them\n", args[1])
			return exitFailure
		}
		fmt.Fprintf(e.stderr, "bastion admit: %v\n", err)
		return exitFailure
	}
	switch {
	case args[0] == "list" && len(args) == 1:
		recs, err := svc.List(ctx)
		if err != nil {
			return fail(err)
		}
		if asJSON {
			writeJSON(e.stdout, recs)
			return exitOK
		}
		tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STATUS\tREASON\tNAME\tDIGEST\tFINDINGS")
		for _, r := range recs {
			d, findings := r.Digest, 0
			if r.Pending != nil {
				d, findings = r.Pending.Digest, len(r.Pending.Findings)
			}
			reason := r.Reason
			if reason == "" {
				reason = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.Status, reason, r.Ref(), d, findings)
		}
		_ = tw.Flush()
		return exitOK
	case args[0] == "show" && len(args) == 2:
		it, err := svc.Show(ctx, args[1])
		if err != nil {
			return fail(err)
		}
		writeJSON(e.stdout, it)
		return exitOK
	case args[0] == "approve" && len(args) == 2:
		if digest == "" {
			fmt.Fprintln(e.stderr, "bastion admit: review approve needs --digest: the digest that was reviewed (review list shows it)")
			return exitUsage
		}
		if by == "" {
			fmt.Fprintln(e.stderr, "bastion admit: review approve needs --by WHO (USER is not set)")
			return exitUsage
		}
		if err := svc.Approve(ctx, args[1], digest, by); err != nil {
			return fail(err)
		}
		fmt.Fprintf(e.stderr, "bastion admit: %s approved at digest %s\n", args[1], digest)
		return exitOK
	case args[0] == "reject" && len(args) == 2:
		if by == "" {
			fmt.Fprintln(e.stderr, "bastion admit: review reject needs --by WHO (USER is not set)")
			return exitUsage
		}
		if err := svc.Reject(ctx, args[1], by); err != nil {
			return fail(err)
		}
		fmt.Fprintf(e.stderr, "bastion admit: %s rejected\n", args[1])
		return exitOK
	case args[0] == "forget" && len(args) == 2:
		if by == "" {
			fmt.Fprintln(e.stderr, "bastion admit: review forget needs --by WHO (USER is not set)")
			return exitUsage
		}
		if err := svc.Forget(ctx, args[1], by); err != nil {
			return fail(err)
		}
		fmt.Fprintf(e.stderr, "bastion admit: %s forgotten\n", args[1])
		return exitOK
	}
	if what, ok := reviewArity[args[0]]; ok {
		fmt.Fprintf(e.stderr, "bastion admit: review %s takes %s\n\n", args[0], what)
	} else {
		fmt.Fprintf(e.stderr, "bastion admit: no review command %q\n\n", args[0])
	}
	fmt.Fprint(e.stderr, admitUsage)
	return exitUsage
}

// reviewArity says what each review command takes, for the line that
// tells a command given the wrong arguments.
var reviewArity = map[string]string{"list": "no name", "show": "one name", "approve": "one name and --digest", "reject": "one name", "forget": "one name"}

// reviewService is the running gateway's review when one answers on the
// socket, else review on the ledger file.
func reviewService(ctx context.Context, cfg *gwconfig.Config, environ []string) (review.Service, func(), error) {
	if c, err := review.Dial(ctx, cfg.ReviewSocket()); err == nil {
		return c, func() {}, nil
	}
	if !cfg.Admission.Ledger.Shared() {
		if _, err := os.Stat(cfg.LedgerPath()); errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("no ledger at %s yet: run bastion admit --evidence DIR, or start the gateway, to discover what to review", cfg.LedgerPath())
		}
	}
	store, err := openLedger(ctx, cfg, environ)
	if errors.Is(err, ledger.ErrLocked) {
		return nil, nil, fmt.Errorf("the ledger is locked by a gateway whose review socket (%s) does not answer", cfg.ReviewSocket())
	}
	if err != nil {
		return nil, nil, err
	}
	sink, err := audit.Open(cfg.Audit.File)
	if err != nil {
		_ = store.Close()
		return nil, nil, err
	}
	return &review.Ledger{Store: store, Audit: sink}, func() { _ = sink.Close(); _ = store.Close() }, nil
}

// writeJSON writes v indented, with <, > and & as they are: a reviewer
// must read a descriptor's "<system>" as written.
func writeJSON(w io.Writer, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	// Invisible characters are written as escapes: the reviewer must
	// see a hidden instruction, not read past it.
	_, _ = w.Write(admit.EscapeInvisible(buf.Bytes()))
}

// openLedger opens the configured ledger: the bbolt file (waiting a
// second for another process's lock), or the shared PostgreSQL database
// whose connection string is in the variable the configuration names.
func openLedger(ctx context.Context, cfg *gwconfig.Config, environ []string) (ledger.Store, error) {
	l := cfg.Admission.Ledger
	if !l.Shared() {
		st, err := ledger.Open(cfg.LedgerPath(), time.Second)
		if err != nil && !errors.Is(err, ledger.ErrLocked) && !filepath.IsAbs(cfg.LedgerPath()) {
			// A relative state_dir is the working directory's: say which,
			// for a gateway a desktop client started elsewhere.
			wd, _ := os.Getwd()
			return nil, fmt.Errorf("%w (state_dir %q is relative to the working directory, %s)", err, cfg.StateDir, wd)
		}
		return st, err
	}
	dsn, ok := lookupIn(environ)(l.PostgresDSNEnv)
	if !ok || dsn == "" {
		return nil, fmt.Errorf("admission.ledger.postgres_dsn_env: %s is not set in the environment", l.PostgresDSNEnv)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return ledger.OpenPostgres(cctx, dsn)
}
