// Package evidence writes the reviewer's bundle of an admission (seed
// 001; GATEWAY.md "Evidence"): what every server's list looked like page
// by page, what was admitted, rejected, quarantined or left for review,
// and the ledger. Every file is replaced whole (written aside, then
// renamed), so a reader never sees half a bundle file.
//
// The files, all JSON or JSON Lines:
//
//	servers.json      server → discovered or failed closed, with the error; its
//	                  identity, instructions and the scanner's findings on them
//	page-trace.jsonl  one line per tools/list request (and per prompts/list
//	                  request, with "list":"prompts/list")
//	admitted.json     kind ("prompt", or none for a tool), qualified name,
//	                  server, downstream name, digest, approval
//	rejected.json     qualified name (or server and index), category, detail, raw descriptor
//	quarantined.json  held after approval: reason, findings, diff against the pin
//	review.json       waiting for a first review: reason, findings
//	shadowed.json     resources and templates not offered because a server
//	                  listed before theirs in the configuration owns their
//	                  URI: kind, uri, owner, server
//	ledger.json       reference (a tool's qualified name, prompt:<qualified>)
//	                  → digest, publisher, identity, approved_at, status
//
// and, written by `bastion admit --evidence`, audit.jsonl: the run's audit
// events.
package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/discover"
	"github.com/mcp-bastion/bastion/internal/gateway/review"
)

// Server is one server's discovery.
type Server struct {
	Name string `json:"name"`
	// Outcome is "discovered", "failed_closed" or "pending" (not yet
	// settled).
	Outcome string          `json:"outcome"`
	Error   string          `json:"error,omitempty"`
	Trace   []discover.Page `json:"-"`
	// PromptTrace is the walk of the server's prompts/list (none when
	// the server offers no prompts); PromptError why it failed.
	PromptTrace []discover.Page `json:"-"`
	PromptError string          `json:"prompt_error,omitempty"`
	// ResourceTrace and TemplateTrace are the walks of its
	// resources/list and resources/templates/list; ResourceError why
	// they failed.
	ResourceTrace []discover.Page `json:"-"`
	TemplateTrace []discover.Page `json:"-"`
	ResourceError string          `json:"resource_error,omitempty"`
	// Identity is what the server reported of itself at its last
	// handshake, as pinned with its tools; Instructions are its
	// instructions (never relayed to callers) and InstructionFindings the
	// scanner's evidence on them.
	Identity            *admit.Identity `json:"identity,omitempty"`
	Instructions        string          `json:"instructions,omitempty"`
	InstructionFindings []admit.Finding `json:"instruction_findings,omitempty"`
}

// Bundle is what is written.
type Bundle struct {
	Servers  []Server
	Snapshot *catalog.Snapshot
	Records  []admit.Record
}

// FailedClosed reports whether any server failed closed or never settled.
func (b Bundle) FailedClosed() bool {
	for _, s := range b.Servers {
		if s.Outcome != "discovered" {
			return true
		}
	}
	return false
}

type traceLine struct {
	Server string `json:"server"`
	// List is the method walked when it is not tools/list.
	List string `json:"list,omitempty"`
	discover.Page
}

type admitted struct {
	Kind      admit.Kind      `json:"kind,omitempty"`
	Qualified string          `json:"qualified"`
	Server    string          `json:"server"`
	Name      string          `json:"name"`
	Digest    string          `json:"digest"`
	Approval  *admit.Approval `json:"approval,omitempty"`
}

type ledgerEntry struct {
	Digest     string          `json:"digest,omitempty"`
	Publisher  string          `json:"publisher,omitempty"`
	Identity   *admit.Identity `json:"identity,omitempty"`
	ApprovedAt *time.Time      `json:"approved_at,omitempty"`
	Status     admit.Status    `json:"status"`
	Reason     string          `json:"reason,omitempty"`
}

// Write writes b into dir, creating it (0700) when needed.
func Write(dir string, b Bundle) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	var trace bytes.Buffer
	enc := json.NewEncoder(&trace)
	enc.SetEscapeHTML(false)
	for _, s := range b.Servers {
		for _, p := range s.Trace {
			if err := enc.Encode(traceLine{Server: s.Name, Page: p}); err != nil {
				return fmt.Errorf("evidence: %w", err)
			}
		}
		for _, l := range []struct {
			list  string
			pages []discover.Page
		}{{"prompts/list", s.PromptTrace}, {"resources/list", s.ResourceTrace}, {"resources/templates/list", s.TemplateTrace}} {
			for _, p := range l.pages {
				if err := enc.Encode(traceLine{Server: s.Name, List: l.list, Page: p}); err != nil {
					return fmt.Errorf("evidence: %w", err)
				}
			}
		}
	}
	approvals := map[string]*admit.Approval{}
	ledger := map[string]ledgerEntry{}
	quarantined, pending := []review.Item{}, []review.Item{}
	for _, r := range b.Records {
		e := ledgerEntry{Digest: r.Digest, Identity: r.Identity, Status: r.Status, Reason: r.Reason}
		if r.Identity != nil {
			e.Publisher = r.Identity.Publisher
		}
		if r.Approval != nil {
			at := r.Approval.At
			e.ApprovedAt = &at
			approvals[r.Ref()] = r.Approval
		}
		ledger[r.Ref()] = e
		switch r.Status {
		case admit.Quarantined:
			quarantined = append(quarantined, review.ItemOf(r))
		case admit.Pending:
			pending = append(pending, review.ItemOf(r))
		}
	}
	adm := []admitted{}
	rejected := []catalog.Rejected{}
	shadowed := []catalog.Shadowed{}
	if b.Snapshot != nil {
		for _, t := range b.Snapshot.Tools {
			adm = append(adm, admitted{Qualified: t.Qualified, Server: t.Server, Name: t.Name, Digest: t.Digest, Approval: approvals[t.Qualified]})
		}
		for _, p := range b.Snapshot.Prompts {
			ref := admit.Ref(admit.KindPrompt, p.Qualified)
			adm = append(adm, admitted{Kind: admit.KindPrompt, Qualified: p.Qualified, Server: p.Server, Name: p.Name,
				Digest: p.Digest, Approval: approvals[ref]})
		}
		for _, r := range b.Snapshot.Resources {
			q := r.Server + "." + r.URI
			adm = append(adm, admitted{Kind: admit.KindResource, Qualified: q, Server: r.Server, Name: r.URI,
				Digest: r.Digest, Approval: approvals[admit.Ref(admit.KindResource, q)]})
		}
		for _, t := range b.Snapshot.Templates {
			q := t.Server + "." + t.URITemplate
			adm = append(adm, admitted{Kind: admit.KindTemplate, Qualified: q, Server: t.Server, Name: t.URITemplate,
				Digest: t.Digest, Approval: approvals[admit.Ref(admit.KindTemplate, q)]})
		}
		shadowed = append(shadowed, b.Snapshot.Shadowed...)
		rejected = append(rejected, b.Snapshot.Rejected...)
	}
	servers := b.Servers
	if servers == nil {
		servers = []Server{}
	}
	files := []struct {
		name string
		v    any
	}{
		{"servers.json", servers}, {"admitted.json", adm}, {"rejected.json", rejected},
		{"quarantined.json", quarantined}, {"review.json", pending}, {"ledger.json", ledger},
		{"shadowed.json", shadowed},
	}
	if err := replace(dir, "page-trace.jsonl", trace.Bytes()); err != nil {
		return err
	}
	for _, f := range files {
		var data bytes.Buffer
		enc := json.NewEncoder(&data)
		enc.SetEscapeHTML(false) // descriptors are read by people: <system> stays legible
		enc.SetIndent("", "  ")
		if err := enc.Encode(f.v); err != nil {
			return fmt.Errorf("evidence: %s: %w", f.name, err)
		}
		if err := replace(dir, f.name, admit.EscapeInvisible(data.Bytes())); err != nil {
			return err
		}
	}
	return nil
}

// replace writes name in dir through a temporary file and a rename.
func replace(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("evidence: %s: %w", name, werr)
	}
	return nil
}
