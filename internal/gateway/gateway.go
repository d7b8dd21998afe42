// Package gateway assembles `bastion gateway`: one upstream connector per
// configured downstream server, discovery of each server's tools into the
// catalog (again when the server says its list changed, when it
// reconnects, and on the refresh interval), and the invoke path from a
// qualified tool name to the downstream. The fronts (HTTP in package
// front, stdio through package session) call [Gateway.ListTools] and
// [Gateway.Invoke].
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/gateway/discover"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
	"github.com/mcp-bastion/bastion/internal/gateway/metrics"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/gateway/upstream"
)

// listChangedDebounce is the shortest time between two walks of one
// server's list: a flood of list_changed notifications costs one walk at
// a time, at most one a second.
var listChangedDebounce = time.Second

// conn is what the gateway needs of an upstream connector.
type conn interface {
	Call(ctx context.Context, method string, params []byte, opts upstream.CallOptions) (jsontext.Value, error)
	Close(ctx context.Context) error
	Stats() *upstream.Stats
	Restarts() int
	Connected() bool
}

// Gateway is the running gateway. Its methods are safe for concurrent use.
type Gateway struct {
	cfg     *config.Config
	log     *slog.Logger
	catalog *catalog.Catalog
	servers map[string]*downstream
	order   []string // server names in configuration order
	metrics *metrics.Metrics
	policy  *policy.Policy // nil denies every call
	filter  bool           // each caller lists only what some rule may allow it
	audit   *audit.Sink    // nil records nothing
	ledger  ledger.Store   // nil fails every server closed
	now     func() time.Time

	evidenceDir string // "" keeps no bundle
	evidenceMu  sync.Mutex

	logLevel logLevelState // what logging/setLevel asked of the downstreams
	subs     *subscriptions
	rounds   *inputSealer // seals the rounds of input handed to callers

	ctx    context.Context // ends at Close; bounds every walk
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// downstream is one configured server and its discovery state.
type downstream struct {
	g    *Gateway
	name string
	cfg  config.Server
	conn conn
	// started closes once conn is set: the connector's callbacks can
	// come before StartStdio or NewHTTP has returned.
	started chan struct{}
	slots   *slots // the requests in flight, a share per principal

	mu      sync.Mutex
	walking bool      // a walk is in flight
	again   bool      // another walk is wanted after it
	last    time.Time // when the last walk began
	settled bool      // discovered, or failed closed, at least once
	ready   bool      // settled, and its evidence written since
	trace   []discover.Page
	lastErr string
	info    upstream.Info // the last handshake's
	// promptTrace and promptErr are the last prompts/list walk's (none
	// when the server does not offer prompts).
	promptTrace []discover.Page
	promptErr   string
	// resourceTrace and resourceErr are the last walk's of the
	// resource and template lists.
	resourceTrace, templateTrace []discover.Page
	resourceErr                  string

	// judgeMu orders the catalog updates of this server: a walk's, and
	// a shared ledger's re-read of the descriptors it last found.
	judgeMu   sync.Mutex
	lastTools []jsontext.Value // under judgeMu; nil before a complete walk
	// lastPrompts is the last complete prompts/list, under judgeMu; nil
	// when there is none to judge again. lastResources and
	// lastTemplates are the last complete resources/list and
	// resources/templates/list (lastResources nil when there are none).
	lastPrompts                  []jsontext.Value
	lastResources, lastTemplates []jsontext.Value

	// rejectedSeen are the rejections the last walk audited (one walk at
	// a time reads and writes it).
	rejectedSeen map[string]bool
}

// New builds the gateway for cfg; Start connects it.
func New(cfg *config.Config, log *slog.Logger) *Gateway {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, log: log, servers: map[string]*downstream{}, now: defaultNow, subs: newSubscriptions(),
		rounds: randomSealer()}
	g.catalog = catalog.New(gate{g}, admit.Options{
		Headers: admit.HeaderMode(cfg.Admission.HeaderMirroring), Sensitive: cfg.Admission.SensitiveNames})
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for _, s := range cfg.Servers {
		d := &downstream{g: g, name: s.Name, cfg: s, started: make(chan struct{}),
			slots: newSlots(cfg.Limits.InflightPerDownstream)}
		g.servers[s.Name] = d
		g.order = append(g.order, s.Name)
	}
	g.catalog.SetOrder(g.order)
	g.catalog.SetBare(cfg.Names == "bare")
	return g
}

// UseKey seals the rounds of input handed to 2026-07-28 callers with a
// key derived from secret, so that every replica holding it resumes them;
// call it before Start. Without it the gateway uses a key of its own, and
// a round handed out does not outlive the process.
func (g *Gateway) UseKey(secret []byte) error {
	s, err := newInputSealer(secret)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g.rounds = s
	return nil
}

// Instrument records the gateway's work in m; call it before Start.
func (g *Gateway) Instrument(m *metrics.Metrics) { g.metrics = m }

// Authorize decides every call with p, filters listings by it when filter
// is set, and records each decision in sink; call it before Start.
// Without it every call is denied.
func (g *Gateway) Authorize(p *policy.Policy, filter bool, sink *audit.Sink) {
	g.policy, g.filter, g.audit = p, filter, sink
}

// Audit returns the decision log's sink (nil for none).
func (g *Gateway) Audit() *audit.Sink { return g.audit }

// Downstreams reports every server for the metrics collector.
func (g *Gateway) Downstreams() []metrics.Downstream {
	var out []metrics.Downstream
	for _, st := range g.Status() {
		d := metrics.Downstream{Server: st.Name, Up: st.Connected, Tools: st.Tools, Restarts: st.Restarts}
		if st.Stats != nil {
			d.Garbage, d.Oversized, d.Unexpected = st.Stats.Garbage.Load(), st.Stats.Oversized.Load(), st.Stats.Unexpected.Load()
			d.QueueFull, d.Refused = st.Stats.Dropped.Load(), st.Stats.Refused.Load()
		}
		out = append(out, d)
	}
	return out
}

// Catalog returns the catalog.
func (g *Gateway) Catalog() *catalog.Catalog { return g.catalog }

// Start starts every downstream. Discovery of each begins when it
// connects.
func (g *Gateway) Start() {
	g.claimFromLedger()
	for _, name := range g.order {
		d := g.servers[name]
		if d.cfg.Stdio() {
			d.conn = upstream.StartStdio(upstream.StdioOptions{
				Name: d.name, Command: d.cfg.Command, Env: d.cfg.Env, Dir: d.cfg.Dir,
				MaxMessage: int(g.cfg.Limits.DownstreamMessage), Logger: g.log,
				OnNotify: d.notification, OnState: d.state, OnConnect: d.connect, Legacy: d.cfg.Protocol == "legacy",
			})
			close(d.started)
			continue
		}
		d.conn = upstream.NewHTTP(upstream.HTTPOptions{
			Name: d.name, URL: d.cfg.URL, Headers: d.cfg.Headers,
			MaxMessage: int64(g.cfg.Limits.DownstreamMessage), Logger: g.log,
			OnNotify: d.notification, OnState: d.state, OnConnect: d.connect, Legacy: d.cfg.Protocol == "legacy",
		})
		close(d.started)
	}
	if r := g.cfg.Discovery.RefreshEvery(); r > 0 {
		g.wg.Add(1)
		go g.everyServer(r, (*downstream).discover) // walk every list again
	}
	if g.cfg.Admission.Ledger.Shared() {
		g.wg.Add(1)
		go g.everyServer(sharedLedgerReread, (*downstream).reread)
	}
}

// sharedLedgerReread is how often a gateway on a shared ledger judges its
// servers' descriptors again, so that an approval made through another
// replica takes effect here within seconds (decision 15).
var sharedLedgerReread = 3 * time.Second

// reread judges every server's last complete list against the ledger
// again, without listing the servers again.
func (d *downstream) reread() {
	d.judgeMu.Lock()
	defer d.judgeMu.Unlock()
	if d.lastTools == nil || d.conn == nil || !d.conn.Connected() {
		return
	}
	before := admissionState(d.g.catalog.Snapshot(), d.name)
	if err := d.g.catalog.Update(d.catalogServer(), d.lastTools); err != nil {
		d.g.log.Warn("the shared ledger could not be read; none of the server's tools is offered",
			slog.String("server", d.name), slog.String("error", err.Error()))
	} else {
		d.rejudgeOthers()
	}
	// A decision another replica recorded (an approval, a rejection)
	// changes what this replica offers and holds: its bundle must say
	// so too, but an unchanged re-read every few seconds writes nothing.
	if admissionState(d.g.catalog.Snapshot(), d.name) != before {
		d.g.writeEvidence()
	}
}

// admissionState sums up what the catalog offers and holds of server:
// each tool's name and digest, each held record's name, status, digest
// and pending digest. Two equal states have the same evidence.
func admissionState(s *catalog.Snapshot, server string) string {
	var b strings.Builder
	for _, t := range s.Tools {
		if t.Server == server {
			fmt.Fprintf(&b, "t %s %s\n", t.Qualified, t.Digest)
		}
	}
	for _, p := range s.Prompts {
		if p.Server == server {
			fmt.Fprintf(&b, "p %s %s\n", p.Qualified, p.Digest)
		}
	}
	for _, r := range s.Held {
		if r.Server != server {
			continue
		}
		pending := ""
		if r.Pending != nil {
			pending = r.Pending.Digest
		}
		fmt.Fprintf(&b, "h %s %s %s %s\n", r.Ref(), r.Status, r.Digest, pending)
	}
	return b.String()
}

// everyServer runs fn for every server, in configuration order, each
// interval until the gateway closes.
func (g *Gateway) everyServer(every time.Duration, fn func(*downstream)) {
	defer g.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
			for _, name := range g.order {
				fn(g.servers[name])
			}
		}
	}
}

// Close stops discovery and shuts every downstream down, in parallel,
// within ctx.
func (g *Gateway) Close(ctx context.Context) error {
	g.cancel()
	g.wg.Wait()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, d := range g.servers {
		if d.conn == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.conn.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Ready reports whether every server has been discovered or has failed
// closed at least once.
func (g *Gateway) Ready() bool {
	for _, d := range g.servers {
		d.mu.Lock()
		ready := d.ready
		d.mu.Unlock()
		if !ready {
			return false
		}
	}
	return true
}

// ServerStatus is one server's state, for health and metrics.
type ServerStatus struct {
	Name      string
	Connected bool
	Settled   bool
	Tools     int
	Restarts  int
	LastError string
	Trace     []discover.Page
	// PromptTrace and PromptError are the last prompts/list walk's.
	PromptTrace []discover.Page
	PromptError string
	// ResourceTrace, TemplateTrace and ResourceError are the last
	// resources/list and resources/templates/list walk's.
	ResourceTrace, TemplateTrace []discover.Page
	ResourceError                string
	Stats                        *upstream.Stats
}

// Status reports every server, in configuration order.
func (g *Gateway) Status() []ServerStatus {
	snap := g.catalog.Snapshot()
	count := map[string]int{}
	for _, t := range snap.Tools {
		count[t.Server]++
	}
	var out []ServerStatus
	for _, name := range g.order {
		d := g.servers[name]
		d.mu.Lock()
		st := ServerStatus{Name: name, Settled: d.settled, Tools: count[name], LastError: d.lastErr, Trace: d.trace,
			PromptTrace: d.promptTrace, PromptError: d.promptErr,
			ResourceTrace: d.resourceTrace, TemplateTrace: d.templateTrace, ResourceError: d.resourceErr}
		d.mu.Unlock()
		if d.conn != nil {
			st.Restarts = d.conn.Restarts()
			st.Stats = d.conn.Stats()
			st.Connected = d.conn.Connected()
		}
		out = append(out, st)
	}
	return out
}

// claimFromLedger gives each configured server the resource URIs and
// templates the ledger holds for it (admitted, held for review,
// quarantined or rejected by a reviewer: all but removed), until it is
// listed: a server that is down at start keeps
// them from the servers listed after it (catalog.Claim). A ledger that
// cannot be read claims nothing; discovery then fails on it anyway.
func (g *Gateway) claimFromLedger() {
	if g.ledger == nil {
		return
	}
	ctx, cancel := context.WithTimeout(g.ctx, 10*time.Second)
	defer cancel()
	recs, err := g.ledger.All(ctx)
	if err != nil {
		g.log.Warn("the ledger could not be read for the resources servers claim", slog.String("error", err.Error()))
		return
	}
	uris, templates := map[string][]string{}, map[string][]string{}
	for _, r := range recs {
		// Every record but a removed one is a URI the server listed last
		// (a rejected one too: its listing still claims it).
		if _, ok := g.servers[r.Server]; !ok || r.Status == admit.Removed {
			continue
		}
		switch r.Kind {
		case admit.KindResource:
			uris[r.Server] = append(uris[r.Server], r.Name)
		case admit.KindTemplate:
			templates[r.Server] = append(templates[r.Server], r.Name)
		}
	}
	for _, name := range g.order {
		if len(uris[name]) > 0 || len(templates[name]) > 0 {
			g.catalog.Claim(name, uris[name], templates[name])
		}
	}
}

// connect hears of a new connection before any call can reach it. A
// server that came back as another one must not be called under the old
// approvals, not even while its list is walked again: its last lists
// are judged at once under the new identity, which quarantines them,
// before the connection is made the one calls go to.
func (d *downstream) connect(c *upstream.Client) {
	<-d.started
	info, ok := c.Info()
	if !ok {
		return
	}
	before := d.catalogServer().Identity
	d.mu.Lock()
	d.info = info
	d.mu.Unlock()
	if d.catalogServer().Identity == before {
		return
	}
	d.judgeMu.Lock()
	defer d.judgeMu.Unlock()
	if d.lastTools != nil {
		if err := d.g.catalog.Update(d.catalogServer(), d.lastTools); err != nil {
			d.lastTools = nil
		}
	}
	d.rejudgeOthers()
}

// state hears of the downstream's connection: a new connection is listed
// anew. While a server reconnects its tools stay listed, and calls to them
// fail as the server being unavailable; a server shut down is removed.
func (d *downstream) state(s upstream.State, _ *upstream.Client) {
	<-d.started
	switch s {
	case upstream.Connected:
		d.discover()
		// A new process, or a new session, holds none of the
		// subscriptions the gateway keeps for its subscribers.
		d.g.wg.Go(func() { d.g.resubscribe(d.name) })
	case upstream.Failed:
		// Not connected: nothing of it is offered, and it counts as
		// failed closed until a connection succeeds.
		d.mu.Lock()
		d.settled, d.lastErr = true, "the server could not be connected"
		d.mu.Unlock()
		d.offerNothing()
		d.g.writeEvidence()
		d.markReady()
	case upstream.Closed:
		d.offerNothing()
	}
}

// markReady counts the server as settled for /readyz — after its
// evidence was written, so that a ready gateway's bundle already says
// what became of it.
func (d *downstream) markReady() {
	d.mu.Lock()
	d.ready = true
	d.mu.Unlock()
}

// offerNothing removes the server from the catalog, and forgets its last
// list so that no re-read of a shared ledger offers it again.
func (d *downstream) offerNothing() {
	d.judgeMu.Lock()
	defer d.judgeMu.Unlock()
	d.lastTools, d.lastPrompts, d.lastResources, d.lastTemplates = nil, nil, nil, nil
	d.g.catalog.Remove(d.name)
}

// rejudgeOthers judges the server's last prompt, resource and template
// lists again (a shared ledger's re-read, a changed identity); judgeMu
// is held. A list the ledger fails on is offered no more.
func (d *downstream) rejudgeOthers() {
	if d.lastPrompts != nil {
		if err := d.g.catalog.UpdatePrompts(d.catalogServer(), d.lastPrompts); err != nil {
			d.lastPrompts = nil
		}
	}
	if d.lastResources != nil {
		if err := d.g.catalog.UpdateResources(d.catalogServer(), d.lastResources, d.lastTemplates); err != nil {
			d.lastResources, d.lastTemplates = nil, nil
		}
	}
}

// notification hears what the downstream says outside a call.
func (d *downstream) notification(n upstream.Notification) {
	<-d.started
	switch n.Method {
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		// One walk reads both lists: a change of either is judged with
		// the server's identity as it is now.
		d.discover()
	case "notifications/resources/updated":
		d.g.resourceUpdated(d.name, n.Params)
	case "notifications/message":
		// A log message of the server: it goes to the gateway's log
		// under the server's name, never its data to the audit.
		d.g.log.Debug("downstream log message", slog.String("server", d.name))
	}
}

// discover walks the server's list now, or, when a walk is in flight,
// once more after it. Walks of one server are spaced at least
// listChangedDebounce apart.
func (d *downstream) discover() {
	d.mu.Lock()
	if d.walking {
		d.again = true
		d.mu.Unlock()
		return
	}
	d.walking = true
	d.mu.Unlock()
	d.g.wg.Add(1)
	go d.walkLoop()
}

func (d *downstream) walkLoop() {
	defer d.g.wg.Done()
	for {
		d.mu.Lock()
		wait := listChangedDebounce - time.Since(d.last)
		d.mu.Unlock()
		if wait > 0 {
			select {
			case <-d.g.ctx.Done():
				d.finish()
				return
			case <-time.After(wait):
			}
		}
		d.mu.Lock()
		d.last = time.Now()
		d.again = false
		d.mu.Unlock()
		d.walk()
		d.mu.Lock()
		if !d.again || d.g.ctx.Err() != nil {
			d.walking = false
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
}

func (d *downstream) finish() {
	d.mu.Lock()
	d.walking = false
	d.mu.Unlock()
}

// walk reads the whole list and updates the catalog: all of it, or, when
// the list cannot be completed, nothing of this server.
func (d *downstream) walk() {
	lim := discover.Limits{Pages: d.g.cfg.Discovery.Pages, Tools: d.g.cfg.Discovery.Tools, Timeout: d.g.cfg.Discovery.ListTimeout.D()}
	lister := discover.ListerFunc(func(ctx context.Context, params []byte) (jsontext.Value, error) {
		return d.conn.Call(ctx, "tools/list", params, upstream.CallOptions{})
	})
	res := discover.Walk(d.g.ctx, lister, lim)
	if d.g.ctx.Err() != nil {
		return
	}
	d.g.metrics.Walk(d.name, len(res.Trace), res.Err != nil)
	// The catalog changes before the server counts as settled, so that
	// a ready gateway offers what it discovered.
	defer func() {
		d.mu.Lock()
		d.trace, d.settled = res.Trace, true
		d.lastErr = ""
		if res.Err != nil {
			d.lastErr = res.Err.Error()
		}
		d.mu.Unlock()
		d.g.writeEvidence()
		d.markReady()
	}()
	if res.Err != nil {
		d.g.log.Warn("the list of a downstream could not be read whole; none of its tools is offered",
			slog.String("server", d.name), slog.Int("pages", len(res.Trace)), slog.String("error", res.Err.Error()))
		d.offerNothing()
		return
	}
	d.judgeMu.Lock()
	err := d.g.catalog.Update(d.catalogServer(), res.Tools)
	d.lastTools = res.Tools
	if d.lastTools == nil {
		// A complete list of no tools: a re-read still judges the
		// server's prompts and resources (reread skips a nil list).
		d.lastTools = []jsontext.Value{}
	}
	if err != nil {
		d.lastTools = nil // the ledger failed: nothing to judge again
	}
	d.judgeMu.Unlock()
	if err != nil {
		res.Err = err
		return
	}
	admitted, rejected := 0, 0
	for _, t := range d.g.catalog.Snapshot().Tools {
		if t.Server == d.name {
			admitted++
		}
	}
	for _, r := range d.g.catalog.Snapshot().Rejected {
		if r.Server == d.name && r.Kind == admit.KindTool {
			rejected++
			d.g.log.Warn("a downstream tool was rejected", slog.String("server", d.name), slog.Int("index", r.Index),
				slog.String("category", r.Category), slog.String("detail", r.Detail))
		}
	}
	held := 0
	for _, r := range d.g.catalog.Snapshot().Held {
		if r.Server == d.name && r.Kind == admit.KindTool && r.Status != admit.Removed {
			held++
		}
	}
	d.g.log.Info("downstream tools discovered", slog.String("server", d.name), slog.Int("pages", len(res.Trace)),
		slog.Int("admitted", admitted), slog.Int("held", held), slog.Int("rejected", rejected))
	if held > 0 {
		d.g.log.Warn("downstream tools wait for review and are not offered: see bastion admit review list",
			slog.String("server", d.name), slog.Int("held", held))
	}
	d.walkPrompts(lim)
	d.walkResources(lim)
	d.auditRejections()
}

// walkResources reads the server's whole resources/list and
// resources/templates/list, when its handshake said it offers resources,
// and updates the catalog: all of them, or, when either list cannot be
// completed or judged, none — its tools and prompts are not touched.
func (d *downstream) walkResources(lim discover.Limits) {
	d.mu.Lock()
	offers := offersCapability(d.info.Capabilities, "resources")
	d.mu.Unlock()
	if !offers {
		d.judgeMu.Lock()
		d.lastResources, d.lastTemplates = nil, nil
		d.g.catalog.RemoveResources(d.name)
		d.judgeMu.Unlock()
		d.mu.Lock()
		d.resourceTrace, d.templateTrace, d.resourceErr = nil, nil, ""
		d.mu.Unlock()
		return
	}
	walk := func(method, member string) discover.Result {
		return discover.WalkList(d.g.ctx, discover.ListerFunc(func(ctx context.Context, params []byte) (jsontext.Value, error) {
			return d.conn.Call(ctx, method, params, upstream.CallOptions{})
		}), member, lim)
	}
	res := walk("resources/list", "resources")
	var tmpl discover.Result
	if res.Err == nil {
		tmpl = walk("resources/templates/list", "resourceTemplates")
	}
	if d.g.ctx.Err() != nil {
		return
	}
	d.judgeMu.Lock()
	err := errors.Join(res.Err, tmpl.Err)
	if err == nil {
		err = d.g.catalog.UpdateResources(d.catalogServer(), res.Tools, tmpl.Tools)
	}
	d.lastResources, d.lastTemplates = res.Tools, tmpl.Tools
	if d.lastResources == nil {
		d.lastResources = []jsontext.Value{}
	}
	if err != nil {
		d.lastResources, d.lastTemplates = nil, nil
		d.g.catalog.RemoveResources(d.name)
	}
	d.judgeMu.Unlock()
	d.mu.Lock()
	d.resourceTrace, d.templateTrace, d.resourceErr = res.Trace, tmpl.Trace, ""
	if err != nil {
		d.resourceErr = err.Error()
	}
	d.mu.Unlock()
	if err != nil {
		d.g.log.Warn("the resource lists of a downstream could not be read whole; none of its resources is offered",
			slog.String("server", d.name), slog.String("error", err.Error()))
		return
	}
	snap := d.g.catalog.Snapshot()
	resources, templates, held, shadowed := 0, 0, 0, 0
	for _, r := range snap.Resources {
		if r.Server == d.name {
			resources++
		}
	}
	for _, t := range snap.Templates {
		if t.Server == d.name {
			templates++
		}
	}
	for _, r := range snap.Held {
		if r.Server == d.name && (r.Kind == admit.KindResource || r.Kind == admit.KindTemplate) && r.Status != admit.Removed {
			held++
		}
	}
	for _, sh := range snap.Shadowed {
		if sh.Server == d.name || sh.Owner == d.name {
			shadowed++
		}
	}
	d.g.log.Info("downstream resources discovered", slog.String("server", d.name), slog.Int("resources", resources),
		slog.Int("templates", templates), slog.Int("held", held), slog.Int("shadowed", shadowed))
}

// auditRejections audits each rejected descriptor of the server, tool or
// prompt, once: when it first appears, not on every refresh that finds
// it again.
func (d *downstream) auditRejections() {
	seen := map[string]bool{}
	for _, r := range d.g.catalog.Snapshot().Rejected {
		if r.Server != d.name {
			continue
		}
		sum := sha256.Sum256(r.Raw)
		key := string(r.Kind) + "\x00" + r.Category + "\x00" + hex.EncodeToString(sum[:])
		seen[key] = true
		if d.rejectedSeen[key] {
			continue
		}
		e := audit.Event{Kind: audit.KindAdmission, Server: d.name, Digest: hex.EncodeToString(sum[:]),
			Status: "rejected", Category: r.Category, Mode: d.g.cfg.Admission.FirstUse}
		audit.Name(&e, string(r.Kind), r.Qualified, r.Name)
		d.g.audit.Record(e)
	}
	// A resource another server owns is audited once too, with both
	// servers' names (decision 19).
	for _, sh := range d.g.catalog.Snapshot().Shadowed {
		if sh.Server != d.name {
			continue
		}
		key := "shadowed\x00" + string(sh.Kind) + "\x00" + sh.URI + "\x00" + sh.Owner
		seen[key] = true
		if d.rejectedSeen[key] {
			continue
		}
		e := audit.Event{Kind: audit.KindAdmission, Server: d.name, Status: "shadowed", Reason: "owned_by:" + sh.Owner,
			Mode: d.g.cfg.Admission.FirstUse}
		audit.Name(&e, string(sh.Kind), d.name+"."+sh.URI, sh.URI)
		d.g.audit.Record(e)
	}
	d.rejectedSeen = seen
}

// walkPrompts reads the server's whole prompts/list, when its handshake
// said it offers prompts, and updates the catalog: all of its prompts,
// or, when the list cannot be completed or judged, none — its tools are
// not touched, as a prompt is not one of them.
func (d *downstream) walkPrompts(lim discover.Limits) {
	d.mu.Lock()
	offers := offersCapability(d.info.Capabilities, "prompts")
	d.mu.Unlock()
	if !offers {
		d.judgeMu.Lock()
		d.lastPrompts = nil
		d.g.catalog.RemovePrompts(d.name)
		d.judgeMu.Unlock()
		d.mu.Lock()
		d.promptTrace, d.promptErr = nil, ""
		d.mu.Unlock()
		return
	}
	lister := discover.ListerFunc(func(ctx context.Context, params []byte) (jsontext.Value, error) {
		return d.conn.Call(ctx, "prompts/list", params, upstream.CallOptions{})
	})
	res := discover.WalkList(d.g.ctx, lister, "prompts", lim)
	if d.g.ctx.Err() != nil {
		return
	}
	d.judgeMu.Lock()
	var err error
	if err = res.Err; err == nil {
		err = d.g.catalog.UpdatePrompts(d.catalogServer(), res.Tools)
	}
	d.lastPrompts = res.Tools
	if err != nil {
		d.lastPrompts = nil
		d.g.catalog.RemovePrompts(d.name)
	}
	d.judgeMu.Unlock()
	d.mu.Lock()
	d.promptTrace, d.promptErr = res.Trace, ""
	if err != nil {
		d.promptErr = err.Error()
	}
	d.mu.Unlock()
	if err != nil {
		d.g.log.Warn("the prompt list of a downstream could not be read whole; none of its prompts is offered",
			slog.String("server", d.name), slog.Int("pages", len(res.Trace)), slog.String("error", err.Error()))
		return
	}
	admitted, held, rejected := 0, 0, 0
	snap := d.g.catalog.Snapshot()
	for _, p := range snap.Prompts {
		if p.Server == d.name {
			admitted++
		}
	}
	for _, r := range snap.Held {
		if r.Server == d.name && r.Kind == admit.KindPrompt && r.Status != admit.Removed {
			held++
		}
	}
	for _, r := range snap.Rejected {
		if r.Server == d.name && r.Kind == admit.KindPrompt {
			rejected++
			d.g.log.Warn("a downstream prompt was rejected", slog.String("server", d.name), slog.Int("index", r.Index),
				slog.String("category", r.Category), slog.String("detail", r.Detail))
		}
	}
	d.g.log.Info("downstream prompts discovered", slog.String("server", d.name), slog.Int("pages", len(res.Trace)),
		slog.Int("admitted", admitted), slog.Int("held", held), slog.Int("rejected", rejected))
	if held > 0 {
		d.g.log.Warn("downstream prompts wait for review and are not offered: see bastion admit review list",
			slog.String("server", d.name), slog.Int("held", held))
	}
}

// offersCapability reports whether a handshake's capabilities object
// holds name as an object (the spec's way of declaring a feature).
func offersCapability(caps jsontext.Value, name string) bool {
	var m map[string]jsontext.Value
	if len(caps) == 0 || json.Unmarshal(caps, &m) != nil {
		return false
	}
	v, ok := m[name]
	return ok && v.Kind() == '{'
}

// catalogServer is what the catalog and the ledger know of the server:
// its configured publisher and the identity its last handshake reported,
// and the names of the other servers.
func (d *downstream) catalogServer() catalog.Server {
	d.mu.Lock()
	info := d.info
	d.mu.Unlock()
	name, version := info.Name()
	srv := catalog.Server{Name: d.name, Identity: admit.Identity{Publisher: d.cfg.Publisher, Name: name, Version: version}}
	if info.Instructions != "" {
		sum := sha256.Sum256([]byte(info.Instructions))
		srv.Identity.Instructions = hex.EncodeToString(sum[:])
	}
	for _, o := range d.g.order {
		if o != d.name {
			srv.Others = append(srv.Others, o)
		}
	}
	return srv
}
