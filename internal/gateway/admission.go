package gateway

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/gateway/evidence"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
	"github.com/mcp-bastion/bastion/internal/gateway/review"
)

// errNoLedger fails every server closed when the gateway was started
// without a ledger.
var errNoLedger = errors.New("gateway: no ledger")

// gate is the catalog's Judge: the lifecycle of package admit over the
// ledger, one transaction per server and discovery, with an audit event
// for every verdict that changed.
type gate struct {
	g *Gateway
}

func (a gate) Judge(srv catalog.Server, kind admit.Kind, entries []catalog.Entry) ([]admit.Record, error) {
	g := a.g
	if g.ledger == nil {
		return nil, errNoLedger
	}
	mode := admit.FirstUse(g.cfg.Admission.FirstUse)
	var out []admit.Record
	var events []audit.Event
	err := g.ledger.Transact(g.ctx, srv.Name, func(prev map[string]admit.Record) (ledger.Changes, error) {
		out, events = out[:0], events[:0]
		now := g.now().UTC()
		seen := make(map[string]bool, len(entries))
		var changed []admit.Record
		// The server's records of this kind are bounded: as many as it
		// may list, and as many removed ones again. A name past the bound
		// is held, not recorded — so that a server that lists new names
		// on every walk cannot grow the ledger without end, nor push out
		// a record that pins what it changed (see admit.Forgettable).
		listed := g.cfg.Discovery.Tools
		if listed == 0 { // a configuration that was not defaulted
			listed = config.DefaultTools
		}
		held, n, bound := 0, recordsOf(prev, kind), listed+admit.MaxRemoved
		for _, e := range entries {
			key := admit.Key(kind, e.Qualified)
			seen[key] = true
			var p *admit.Record
			if r, ok := prev[key]; ok {
				p = &r
			} else if n++; n > bound {
				held++
				out = append(out, admit.Record{Kind: kind, Qualified: e.Qualified, Server: srv.Name, Name: e.Name,
					Status: admit.Pending, Reason: reasonLedgerFull, Updated: now})
				continue
			}
			c := admit.Candidate{Digest: e.Digest, Descriptor: e.Canonical, Identity: srv.Identity, Findings: e.Findings, Seen: now}
			r := admit.Observe(p, kind, e.Qualified, srv.Name, e.Name, c, mode, now)
			out = append(out, r)
			switch {
			case p == nil || verdictChanged(*p, r):
				changed = append(changed, r)
				events = append(events, admissionEvent(r, e.Digest, string(mode)))
			case findingsChanged(*p, r):
				// Not a new verdict, so no event; but the reviewer
				// reads the findings of what waits. Only they are
				// written: the identity waiting is what an approval
				// pins, and the approval names only the digest, so a
				// server that changed its identity since the reviewer
				// read the record would have the new one approved
				// unseen. Left as it was, the old one is pinned and
				// the next walk quarantines the tool again, for the
				// reviewer to read the new identity.
				w := *p
				pending := *p.Pending
				pending.Findings = r.Pending.Findings
				w.Pending, w.Updated = &pending, r.Updated
				changed = append(changed, w)
			}
		}
		removed := make([]admit.Record, 0, len(prev))
		for key, r := range prev {
			// Only this kind's list was read: another kind's records
			// are not its to remove.
			if r.Kind != kind || seen[key] {
				continue
			}
			if r.Status != admit.Removed {
				r = admit.Remove(r, now)
				out = append(out, r)
				changed = append(changed, r)
				events = append(events, admissionEvent(r, r.Digest, string(mode)))
			}
			removed = append(removed, r)
		}
		// A server that renames its tools on every list would grow the
		// ledger without bound: names that came and went, and that no
		// reviewer decided anything of, are forgotten past a bound.
		forget := admit.Forget(removed)
		if len(forget) > 0 {
			dropped := make(map[string]bool, len(forget))
			for _, k := range forget {
				dropped[k] = true
			}
			changed = slices.DeleteFunc(changed, func(r admit.Record) bool { return dropped[r.Key()] })
			out = slices.DeleteFunc(out, func(r admit.Record) bool { return dropped[r.Key()] })
		}
		if held > 0 {
			g.log.Warn("the ledger holds as many records of the server as it may: its new names are held, not recorded",
				slog.String("server", srv.Name), slog.String("kind", kindPlural(kind)), slog.Int("held", held))
		}
		return ledger.Changes{Put: changed, Delete: forget}, nil
	})
	if err != nil {
		g.log.Error("the ledger could not be updated; none of the server's "+kindPlural(kind)+" is offered",
			slog.String("server", srv.Name), slog.String("error", err.Error()))
		return nil, err
	}
	for _, e := range events {
		g.audit.Record(e)
	}
	return out, nil
}

// reasonLedgerFull holds a name the ledger has no room for.
const reasonLedgerFull = "ledger_full"

// recordsOf counts the records of kind among a server's records that a
// walk keeps: all but the forgettable ones past admit.MaxRemoved.
func recordsOf(recs map[string]admit.Record, kind admit.Kind) int {
	n, forgettable := 0, 0
	for _, r := range recs {
		switch {
		case r.Kind != kind:
		case admit.Forgettable(r):
			forgettable++
		default:
			n++
		}
	}
	return n + min(forgettable, admit.MaxRemoved)
}

// kindPlural names a kind's descriptors in log lines.
func kindPlural(k admit.Kind) string {
	if k == admit.KindTool {
		return "tools"
	}
	return string(k) + "s"
}

// verdictChanged reports whether a record changed in what it decides —
// not merely in when it was last seen.
func verdictChanged(a, b admit.Record) bool {
	pending := func(r admit.Record) string {
		if r.Pending == nil {
			return ""
		}
		return r.Pending.Digest
	}
	return a.Status != b.Status || a.Reason != b.Reason || a.Digest != b.Digest || pending(a) != pending(b)
}

// findingsChanged reports whether the scanner's findings on what waits
// for review changed though its digest did not (another server
// configured, which the descriptor names).
func findingsChanged(a, b admit.Record) bool {
	return a.Pending != nil && b.Pending != nil && !slices.Equal(a.Pending.Findings, b.Pending.Findings)
}

func admissionEvent(r admit.Record, digest, mode string) audit.Event {
	e := audit.Event{Kind: audit.KindAdmission, Server: r.Server, Digest: digest,
		Status: string(r.Status), Reason: r.Reason, Mode: mode}
	audit.Name(&e, string(r.Kind), r.Qualified, r.Name)
	if r.Status == admit.Admitted && r.Approval != nil {
		e.Mode = r.Approval.Mode
	}
	return e
}

// UseLedger keeps the admission gate's pins in s; call it before Start.
// Without a ledger every server fails closed.
func (g *Gateway) UseLedger(s ledger.Store) { g.ledger = s }

// Ledger returns the ledger (nil for none).
func (g *Gateway) Ledger() ledger.Store { return g.ledger }

// Review is the reviewer's side of the gateway's ledger: a decision is
// in effect when it returns — the server's last lists are judged again
// before the reviewer is answered, so a tool approved is offered, and one
// rejected held, to the next call — and the server's lists are then
// walked again, to judge what it serves now.
func (g *Gateway) Review() review.Service {
	return &review.Ledger{Store: g.ledger, Audit: g.audit, Now: g.now, Changed: func(server string) {
		if d, ok := g.servers[server]; ok {
			d.reread()
			d.discover()
		}
	}}
}

// defaultNow is the gateway's clock; tests replace g.now.
func defaultNow() time.Time { return time.Now() }

// Evidence is the reviewer's bundle as things stand.
func (g *Gateway) Evidence(ctx context.Context) (evidence.Bundle, error) {
	b := evidence.Bundle{Snapshot: g.catalog.Snapshot()}
	for _, st := range g.Status() {
		s := evidence.Server{Name: st.Name, Outcome: "discovered", Error: st.LastError, Trace: st.Trace,
			PromptTrace: st.PromptTrace, PromptError: st.PromptError,
			ResourceTrace: st.ResourceTrace, TemplateTrace: st.TemplateTrace, ResourceError: st.ResourceError}
		if d := g.servers[st.Name]; d != nil {
			srv := d.catalogServer()
			d.mu.Lock()
			instructions, connected := d.info.Instructions, d.info.ServerInfo != nil
			d.mu.Unlock()
			if connected {
				s.Identity = &srv.Identity
			}
			if instructions != "" {
				s.Instructions = instructions
				q, _ := jsontext.AppendQuote(nil, instructions)
				s.InstructionFindings = admit.Scan(q, srv.Others)
			}
		}
		switch {
		case !st.Settled:
			s.Outcome = "pending"
		case st.LastError != "":
			s.Outcome = "failed_closed"
		}
		b.Servers = append(b.Servers, s)
	}
	if g.ledger == nil {
		return b, errNoLedger
	}
	recs, err := g.ledger.All(ctx)
	b.Records = recs
	return b, err
}

// KeepEvidence makes the gateway rewrite the evidence bundle in dir after
// every discovery; call it before Start.
func (g *Gateway) KeepEvidence(dir string) { g.evidenceDir = dir }

// writeEvidence rewrites the bundle, one writer at a time.
func (g *Gateway) writeEvidence() {
	if g.evidenceDir == "" {
		return
	}
	g.evidenceMu.Lock()
	defer g.evidenceMu.Unlock()
	b, err := g.Evidence(g.ctx)
	if err == nil {
		err = evidence.Write(g.evidenceDir, b)
	}
	if err != nil && g.ctx.Err() == nil {
		g.log.Warn("the evidence bundle could not be written", slog.String("error", err.Error()))
	}
}
