package admit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsondec"
)

// FiniteNumbers reports whether every number in v is a finite double.
func FiniteNumbers(v jsontext.Value) bool { return jsondec.Portable(v, 0) }

// Digest is the pin of a descriptor (decision 6): the SHA-256, in hex, of
// the RFC 8785 canonical form of the whole tool object as received —
// unknown members included — and that canonical form.
//
// The canonical form is go-json-experiment's Canonicalize, the JSON
// library the project already uses for strict parsing, at a quarter of
// the cost of github.com/gowebpki/jcs (the RFC author's reference
// implementation, which the tests use as the oracle: both must produce
// the same bytes). A number beyond float64 has no RFC 8785 form;
// Canonicalize would clamp it, so that 1e400 and 1e999 would share one
// digest — such a descriptor is refused here instead.
func Digest(raw jsontext.Value) (string, jsontext.Value, error) {
	if !FiniteNumbers(raw) {
		return "", nil, errors.New("admit: canonical form: a number is outside the range of IEEE 754 doubles")
	}
	canon := jsontext.Value(bytes.Clone(raw))
	if err := canon.Canonicalize(); err != nil {
		return "", nil, fmt.Errorf("admit: canonical form: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), canon, nil
}

// Status is where a tool stands in the ledger. Only an admitted tool is
// listed or callable.
type Status string

// Statuses.
const (
	Admitted    Status = "admitted"
	Pending     Status = "pending_review"
	Quarantined Status = "quarantined"
	Rejected    Status = "rejected"
	Removed     Status = "removed"
)

// Reasons a tool is held.
const (
	ReasonFirstUse        = "first_use"        // never approved; first_use is review
	ReasonScannerFindings = "scanner_findings" // never approved; the scanner found something
	ReasonDigestChanged   = "digest_changed"   // a rug pull: the descriptor changed after approval
	ReasonIdentityChanged = "identity_changed" // the server's publisher or live identity changed
	ReasonReviewer        = "rejected_by_reviewer"
)

// FirstUse says what becomes of a descriptor never seen before.
type FirstUse string

// First-use modes.
const (
	// FirstUseReview holds every new descriptor for review (the default).
	FirstUseReview FirstUse = "review"
	// FirstUsePin trusts a new descriptor on first use, unless the
	// scanner found something in it.
	FirstUsePin FirstUse = "pin"
)

// Identity is what a server is pinned to: the publisher namespace the
// configuration vouches for and the live identity it reports.
type Identity struct {
	Publisher string `json:"publisher,omitempty"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// Instructions is the SHA-256 of the server's instructions, which
	// are pinned with it (never relayed to callers): instructions that
	// change after approval are a change of the server.
	Instructions string `json:"instructions_sha256,omitempty"`
}

// Approval is who let a digest in, when and how.
type Approval struct {
	By   string    `json:"by"`
	At   time.Time `json:"at"`
	Mode string    `json:"mode"` // "review" or "pin"
}

// Candidate is a descriptor as a discovery saw it.
type Candidate struct {
	Digest     string         `json:"digest"`
	Descriptor jsontext.Value `json:"descriptor"` // canonical form
	Identity   Identity       `json:"identity"`
	Findings   []Finding      `json:"findings,omitempty"`
	Seen       time.Time      `json:"seen"`
}

// Kind is what a ledger record pins: a tool (the zero value, which is
// what every record written before prompts were admitted is), a prompt,
// a resource or a resource template (docs/gateway-surface.md decisions
// 17 and 19). A resource's qualified name is <server>.<uri>, a
// template's <server>.<uriTemplate>.
type Kind string

// Kinds.
const (
	KindTool     Kind = ""
	KindPrompt   Kind = "prompt"
	KindResource Kind = "resource"
	KindTemplate Kind = "template"
)

// Key is the ledger key of the kind's record named qualified
// (<server>.<name>). A tool's key is its qualified name, as it always
// was, so that ledgers written before kinds existed need no migration;
// another kind's is <server>.<kind>:<name>. No tool name holds a colon,
// so a prompt never shares a record with a tool of the same name, and
// every key still begins with "<server>.", which keeps a server's
// records one prefix in both stores.
func Key(kind Kind, qualified string) string {
	if kind == KindTool {
		return qualified
	}
	server, name, _ := strings.Cut(qualified, ".")
	return server + "." + string(kind) + ":" + name
}

// Ref is how people name a record (in review, evidence and the audit):
// the qualified name of a tool, <kind>:<qualified> for another kind.
func Ref(kind Kind, qualified string) string {
	if kind == KindTool {
		return qualified
	}
	return string(kind) + ":" + qualified
}

// KeyOfRef is the ledger key of the record a reviewer named by ref.
func KeyOfRef(ref string) string {
	if k, q, ok := strings.Cut(ref, ":"); ok {
		switch Kind(k) {
		case KindPrompt, KindResource, KindTemplate:
			return Key(Kind(k), q)
		}
	}
	return ref
}

// Record is one qualified name's entry in the ledger.
type Record struct {
	// Kind is what the record pins; "" is a tool.
	Kind      Kind   `json:"kind,omitempty"`
	Qualified string `json:"qualified"`
	Server    string `json:"server"`
	Name      string `json:"name"`
	Status    Status `json:"status"`
	Reason    string `json:"reason,omitempty"`
	// Digest, Descriptor and Identity are what was approved (empty
	// before any approval); calls are checked against Descriptor.
	Digest     string         `json:"digest,omitempty"`
	Descriptor jsontext.Value `json:"descriptor,omitempty"`
	Identity   *Identity      `json:"identity,omitempty"`
	Approval   *Approval      `json:"approval,omitempty"`
	// Pending is what waits for review, or what was rejected.
	Pending *Candidate `json:"pending,omitempty"`
	// RejectedDigests are the digests a reviewer refused under this name
	// (the latest maxRejected): they stay refused whatever the server's
	// identity, and however often the server switches back to them.
	RejectedDigests []string `json:"rejected_digests,omitempty"`
	// HeldDigests are the digests quarantined under this name that no
	// reviewer approved (the latest maxRejected). However the server went
	// on — back to what was pinned, then gone — a record that holds one
	// is never forgotten (CheckForget).
	HeldDigests []string `json:"held_digests,omitempty"`
	// Overflowed is set once either list dropped a digest for its bound:
	// what was dropped is no longer known, so the record is never
	// forgotten.
	Overflowed bool      `json:"overflowed,omitempty"`
	Updated    time.Time `json:"updated"`
}

// Key is the record's ledger key.
func (r Record) Key() string { return Key(r.Kind, r.Qualified) }

// Ref is how people name the record.
func (r Record) Ref() string { return Ref(r.Kind, r.Qualified) }

// maxRejected bounds a record's memory of refused digests.
const maxRejected = 32

// Observe is the lifecycle of decisions 6 and 7: what the record of a
// qualified name becomes when discovery finds c under it. prev is nil for
// a name never seen.
//
//   - Never approved: pin mode admits a descriptor the scanner is silent
//     on; anything else waits for review.
//   - Approved: the same digest under the same identity is admitted
//     (also after a quarantine, when the server went back to what was
//     approved); a different identity, or a different digest, is
//     quarantined until a reviewer approves what is served now.
//   - Rejected: the rejected digest stays rejected; another waits for
//     review.
func Observe(prev *Record, kind Kind, qualified, server, name string, c Candidate, mode FirstUse, now time.Time) Record {
	r := Record{Kind: kind, Qualified: qualified, Server: server, Name: name, Updated: now}
	if prev != nil {
		r = *prev
		r.Updated = now
	}
	hold := func(s Status, reason string) Record {
		r.Status, r.Reason, r.Pending = s, reason, &c
		if s == Quarantined {
			r.HeldDigests = r.appendBounded(r.HeldDigests, c.Digest)
		}
		return r
	}
	if slices.Contains(r.RejectedDigests, c.Digest) {
		return hold(Rejected, ReasonReviewer)
	}
	if r.Approval == nil {
		switch {
		case len(c.Findings) > 0:
			return hold(Pending, ReasonScannerFindings)
		case mode == FirstUsePin:
			id := c.Identity
			r.Status, r.Reason, r.Pending = Admitted, "", nil
			r.Digest, r.Descriptor, r.Identity = c.Digest, c.Descriptor, &id
			r.Approval = &Approval{By: "first-use", At: now, Mode: string(FirstUsePin)}
			return r
		}
		return hold(Pending, ReasonFirstUse)
	}
	switch {
	case r.Identity == nil || *r.Identity != c.Identity:
		return hold(Quarantined, ReasonIdentityChanged)
	case c.Digest != r.Digest:
		return hold(Quarantined, ReasonDigestChanged)
	}
	r.Status, r.Reason, r.Pending = Admitted, "", nil
	return r
}

// Remove records that discovery no longer found the name. The approval
// is kept: the same descriptor coming back is admitted again. So is the
// reason a record quarantined or rejected was held for: a reviewer is
// shown it, and may not forget the record (CheckForget).
func Remove(prev Record, now time.Time) Record {
	if prev.Status != Quarantined && prev.Status != Rejected {
		prev.Reason = ""
	}
	prev.Status, prev.Pending, prev.Updated = Removed, nil, now
	return prev
}

// MaxRemoved bounds the removed records of one kind one server keeps
// that pin nothing (Forgettable).
const MaxRemoved = 1000

// Forgettable reports whether a record may be forgotten to keep the
// ledger bounded: removed, and pinning nothing — never approved, by a
// reviewer or on first use, and no digest rejected. Forgetting one is
// forgetting that a name came and went unapproved: if it comes back it is
// judged as a first use again, as it was the first time. An approved
// record is never forgotten: it is what a changed descriptor or identity
// is compared with, so forgetting it would let a server undo its own
// quarantine by renaming its tools for a while.
func Forgettable(r Record) bool {
	return r.Status == Removed && r.Approval == nil && len(r.RejectedDigests) == 0
}

// Forget returns the keys of the records to forget so that no more than
// MaxRemoved forgettable records of each kind remain: the longest
// removed first.
func Forget(recs []Record) []string {
	byKind := map[Kind][]Record{}
	for _, r := range recs {
		if Forgettable(r) {
			byKind[r.Kind] = append(byKind[r.Kind], r)
		}
	}
	var out []string
	for _, rs := range byKind {
		if len(rs) <= MaxRemoved {
			continue
		}
		slices.SortFunc(rs, func(a, b Record) int {
			if c := a.Updated.Compare(b.Updated); c != 0 {
				return c
			}
			return strings.Compare(a.Key(), b.Key())
		})
		for _, r := range rs[:len(rs)-MaxRemoved] {
			out = append(out, r.Key())
		}
	}
	slices.Sort(out)
	return out
}

// Errors of review.
var (
	ErrNothingPending = errors.New("admit: nothing of this name waits for review")
	ErrDigestMismatch = errors.New("admit: the digest is not the one waiting for review")
	ErrStillListed    = errors.New("admit: its server still lists the name; only a removed record may be forgotten")
	ErrHeld           = errors.New("admit: the name holds a digest quarantined and not approved since, or refused; forgetting it would admit what was held as a first use")
)

// CheckForget reports whether a reviewer may forget r, which the ledger's
// bound never does for a record that pins something: only a name its
// server no longer lists, and that holds nothing a reviewer did not
// approve — no digest refused, none quarantined and not approved since
// (whatever the server served after it), no hold when it went.
// Forgetting one forgets its pin: the name, if it comes back, is judged
// as a first use. A record quarantined or refused is never forgotten: a
// server that changes a tool, goes back to what was pinned or not,
// stops listing it, fills its share of the ledger and waits for a
// reviewer to make room would otherwise have the change admitted on
// first use.
func CheckForget(r Record) error {
	switch {
	case r.Status != Removed:
		return ErrStillListed
	case len(r.RejectedDigests) > 0, len(r.HeldDigests) > 0, r.Overflowed, r.Approval != nil && r.Reason != "":
		return ErrHeld
	}
	return nil
}

// Approve pins what waits for review, when digest names it: what the
// reviewer read is what gets pinned.
func Approve(prev Record, digest, by string, now time.Time) (Record, error) {
	if prev.Pending == nil || (prev.Status != Pending && prev.Status != Quarantined && prev.Status != Rejected) {
		return prev, ErrNothingPending
	}
	if prev.Pending.Digest != digest {
		return prev, ErrDigestMismatch
	}
	c := prev.Pending
	id := c.Identity
	prev.Digest, prev.Descriptor, prev.Identity = c.Digest, c.Descriptor, &id
	prev.Approval = &Approval{By: by, At: now, Mode: "review"}
	// An approval overrides an earlier refusal or quarantine of the same
	// digest.
	prev.RejectedDigests = slices.DeleteFunc(slices.Clone(prev.RejectedDigests), func(d string) bool { return d == digest })
	prev.HeldDigests = slices.DeleteFunc(slices.Clone(prev.HeldDigests), func(d string) bool { return d == digest })
	prev.Status, prev.Reason, prev.Pending, prev.Updated = Admitted, "", nil, now
	return prev, nil
}

// Reject refuses what waits for review; it stays refused until the
// server serves something else under the name.
func Reject(prev Record, now time.Time) (Record, error) {
	if prev.Pending == nil || (prev.Status != Pending && prev.Status != Quarantined) {
		return prev, ErrNothingPending
	}
	prev.Status, prev.Reason, prev.Updated = Rejected, ReasonReviewer, now
	prev.RejectedDigests = prev.appendBounded(prev.RejectedDigests, prev.Pending.Digest)
	return prev, nil
}

// appendBounded is digests with d, once, keeping the latest
// maxRejected; r is marked Overflowed when one is dropped.
func (r *Record) appendBounded(digests []string, d string) []string {
	if slices.Contains(digests, d) {
		return digests
	}
	digests = append(slices.Clone(digests), d)
	if n := len(digests); n > maxRejected {
		digests, r.Overflowed = digests[n-maxRejected:], true
	}
	return digests
}
