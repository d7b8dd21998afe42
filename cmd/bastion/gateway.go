package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcp-bastion/bastion/internal/config"
	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	gwconfig "github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/gateway/front"
	"github.com/mcp-bastion/bastion/internal/gateway/metrics"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/gateway/review"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/stdio"
)

const gatewayUsage = `Usage: bastion gateway --config FILE [--check] [--stdio]

Runs the MCP security gateway: one MCP endpoint in front of the downstream
MCP servers the configuration names (stdio child processes and Streamable
HTTP endpoints). Every downstream tool is offered under its qualified name
<server>.<tool>; calls are routed to the server that owns the tool.
Prompts are offered as <server>.<prompt>, and resources under their own
URIs, each owned by the server listed first in servers: that offers it.

Every request is authenticated (Authorization: Bearer: static tokens of
auth.tokens or the variable auth.tokens_env names, or JWTs checked against
auth.jwt's key set; auth: {mode: none} runs without, on loopback only),
and every tools/call, prompts/get and resources/read is decided by
policy.rules: the first rule with a pattern of that kind (tools:, prompts:,
resources: "<server>:<uri>") that matches decides; no matching rule denies.
Decisions go to the audit sink (audit.file, default stderr) as JSON Lines.

Every downstream descriptor passes the admission gate before any caller
sees it: checked (schemas, header mirroring, scanner), pinned by digest in
the ledger (<state_dir>/ledger.db) and, by default (admission.first_use:
review), held until a reviewer approves it with "bastion admit review".
A pinned descriptor that changes, or a server whose identity changes, is
quarantined until approved again. The evidence bundle is kept current in
<state_dir>/evidence; review goes through <state_dir>/review.sock.

By default the gateway serves Streamable HTTP (both protocol eras) at the
configured listen address and path, with GET /healthz (liveness) and
GET /readyz (every server discovered or failed closed). With --stdio it
serves one client on stdin/stdout instead, once every server is discovered
or failed closed (as GET /readyz says): tools, prompts, resources (with
subscriptions), completion, logging, and the servers' requests to the
client during its calls (sampling, elicitation, roots: asked of a
session-era client that declared them, handed to a 2026-07-28 client as
input_required rounds).

Flags:
  --config FILE   the YAML configuration (see examples/gateway/)
  --check         validate the configuration, then exit
  --stdio         serve one client on stdin/stdout instead of HTTP; it is
                  auth.stdio_principal (required unless auth mode is none),
                  and the HTTP callers' tokens (auth.tokens_env) need not
                  be set; the principal may be the only auth key

Relative paths in the file (commands, state_dir, the audit file) are
relative to the directory the gateway is started in: a desktop client
that starts "bastion gateway --stdio" needs absolute ones.

Secrets are never written in the file: ${NAME} references are resolved
from the environment when the gateway starts. The key that seals legacy
session ids, list cursors and the rounds of input handed to 2026-07-28
callers comes from the variable sessions.key_env names (default
MCP_GATEWAY_SESSION_KEY; at least 32 bytes) and is required for HTTP.

Exit status: 0 clean shutdown (or --check passed), 1 abnormal end,
2 bad flags or configuration.
`

func gatewayCmd(ctx context.Context, args []string, e env) int {
	if slices.ContainsFunc(flagArgs(args), isHelpFlag) {
		fmt.Fprint(e.stdout, gatewayUsage)
		return exitOK
	}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	path := fs.String("config", "", "the YAML configuration file")
	check := fs.Bool("check", false, "validate the configuration, then exit")
	stdioMode := fs.Bool("stdio", false, "serve one client on stdin/stdout")
	fs.Usage = func() { fmt.Fprint(e.stderr, gatewayUsage) }
	if ok, code := parseFlags(fs, args, e); !ok {
		return code
	}
	if *path == "" {
		fmt.Fprintln(e.stderr, "bastion gateway: --config FILE is required")
		return exitUsage
	}
	getenv := lookupIn(e.environ)
	load := gwconfig.Load
	if *stdioMode {
		// Its one client is auth.stdio_principal: the HTTP callers'
		// tokens are not read, so a desktop client's configuration need
		// not carry them.
		load = gwconfig.LoadWithoutCallers
	}
	cfg, err := load(*path, getenv)
	if err != nil {
		lines := splitJoined(err)
		// The session key is judged once the file loads. When only what
		// the environment lacks stopped it (the file loads offline), the
		// key is judged too: one run names every variable to set.
		if off, offErr := gwconfig.LoadOffline(*path, getenv); offErr == nil && !*stdioMode {
			if _, keyErr := sessionKey(off, getenv); keyErr != nil {
				lines = append(lines, keyErr.Error())
			}
		}
		fmt.Fprintln(e.stderr, "bastion gateway: invalid configuration:")
		for _, line := range lines {
			fmt.Fprintf(e.stderr, "  %s\n", line)
		}
		return exitUsage
	}
	// What the file alone cannot tell, said together, as the file's own
	// errors are.
	var problems []string
	key, keyErr := sessionKey(cfg, getenv)
	if keyErr != nil && !*stdioMode {
		problems = append(problems, keyErr.Error())
	}
	if *stdioMode && cfg.Auth.StdioPrincipal == nil && !cfg.Anonymous() {
		problems = append(problems, "auth.stdio_principal: --stdio needs auth.stdio_principal: who its one client is (or auth mode none)")
	}
	if *check {
		problems = append(problems, missingCommands(cfg, getenv)...)
	}
	if len(problems) > 0 {
		fmt.Fprintln(e.stderr, "bastion gateway: invalid configuration:")
		for _, m := range problems {
			fmt.Fprintf(e.stderr, "  %s\n", m)
		}
		return exitUsage
	}
	if *check {
		fmt.Fprintf(e.stderr, "bastion gateway: configuration OK (%s: %s)\n", plural(len(cfg.Servers), "server"), serverNames(cfg))
		return exitOK
	}
	// The front's address is taken before anything starts: a port in use
	// stops the gateway before it starts a downstream or opens a ledger,
	// and "listening" is said once it is true.
	var ln net.Listener
	if !*stdioMode {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			fmt.Fprintf(e.stderr, "bastion gateway: listen: %v\n", err)
			return exitFailure
		}
		defer ln.Close()
	}
	log := gatewayLogger(cfg, e.stderr)
	pol, err := policy.Compile(cfg.PolicyRules())
	if err != nil { // validated already; kept for the path that skips it
		fmt.Fprintf(e.stderr, "bastion gateway: %v\n", err)
		return exitUsage
	}
	if len(cfg.Policy.Rules) == 0 {
		log.Warn("no policy rules: every tools/call is denied (add a rule such as {id: all, tools: [\"*\"], roles: [\"*\"]})")
	}
	if cfg.Anonymous() && !*stdioMode {
		log.Warn("auth mode none: callers are not authenticated; every caller is the anonymous principal", slog.String("listen", cfg.Listen))
	}
	sink, err := audit.Open(cfg.Audit.File)
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion gateway: %v\n", err)
		return exitFailure
	}
	defer sink.Close()
	store, err := openLedger(ctx, cfg, e.environ)
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion gateway: %v\n", err)
		return exitFailure
	}
	defer store.Close()
	g := gateway.New(cfg, log)
	if key != nil {
		// Every replica holding the key resumes the rounds of input
		// handed to 2026-07-28 callers; without one (--stdio), the
		// gateway seals them with a key of its own.
		if err := g.UseKey(key); err != nil {
			fmt.Fprintf(e.stderr, "bastion gateway: %v\n", err)
			return exitFailure
		}
	}
	g.Authorize(pol, cfg.FilterToolsList(), sink)
	g.UseLedger(store)
	g.KeepEvidence(cfg.EvidenceDir())
	var m *metrics.Metrics
	if cfg.Metrics != nil {
		m = metrics.New(g.Downstreams)
		g.Instrument(m)
		mctx, stop := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := m.Serve(mctx, cfg.Metrics.Listen, front.GuardListener, log); err != nil {
				log.Error("metrics endpoint stopped", slog.String("error", err.Error()))
			}
		}()
		defer func() { stop(); <-served }()
	}
	// The state directory holds the review socket and the evidence
	// whatever the ledger: created private, as the ledger file's is.
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		fmt.Fprintf(e.stderr, "bastion gateway: state_dir: %v\n", err)
		return exitFailure
	}
	// Review goes through the running gateway (decision 15): bbolt holds
	// the ledger's lock, so `bastion admit review` talks to this socket.
	rctx, stopReview := context.WithCancel(ctx)
	reviewDone := make(chan struct{})
	go func() {
		defer close(reviewDone)
		if err := review.Serve(rctx, cfg.ReviewSocket(), g.Review()); err != nil {
			log.Error("the review socket could not be served; review needs a stopped gateway", slog.String("error", err.Error()))
		}
	}()
	defer func() { stopReview(); <-reviewDone }()
	g.Start()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := g.Close(cctx); err != nil {
			log.Warn("downstreams did not all stop in time", slog.String("error", err.Error()))
		}
	}()
	info := mcp.Implementation{Name: "mcp-bastion-gateway", Title: "mcp-bastion gateway", Version: version}
	if *stdioMode {
		return gatewayStdio(ctx, cfg, g, info, log, e)
	}
	var authn *auth.Authenticator
	if !cfg.Anonymous() {
		var verifier *auth.JWTVerifier
		if j := cfg.Auth.JWT; j != nil {
			verifier = auth.NewJWTVerifier(ctx, auth.JWTOptions{Issuer: j.Issuer, Audience: cfg.PublicURL, JWKSURL: j.JWKSURL,
				RolesClaim: j.RolesClaim, Algorithms: j.Algorithms, Leeway: j.Leeway.D(), Refresh: j.JWKSRefresh.D(),
				MinRefresh: j.JWKSMinRefresh.D(), Client: jwksClient(), Logger: log})
			defer verifier.Close()
		}
		authn = auth.New(cfg.Auth.Static, verifier)
	}
	srv, err := front.New(front.Options{Config: cfg, Gateway: g, Info: info, Key: key, Logger: log, Metrics: m, Authenticator: authn, Revocations: store})
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion gateway: %v\n", err)
		return exitUsage
	}
	log.Info("gateway listening", slog.String("listen", cfg.Listen), slog.String("path", cfg.Path), slog.Int("servers", len(cfg.Servers)))
	if err := srv.Serve(ctx, ln, e.signals); err != nil {
		log.Error("gateway stopped abnormally", slog.String("error", err.Error()))
		return exitFailure
	}
	log.Info("gateway stopped")
	return exitOK
}

// gatewayStdio serves the catalog to one client on stdin/stdout through
// package session, like `bastion serve`.
func gatewayStdio(ctx context.Context, cfg *gwconfig.Config, g *gateway.Gateway, info mcp.Implementation, log *slog.Logger, e env) int {
	enc, err := mcp.NewEncoder(info, front.Instructions, nil, mcp.ToolsListChanged())
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion gateway: %v\n", err)
		return exitFailure
	}
	cursorKey := make([]byte, 32)
	_, _ = rand.Read(cursorKey)
	var longest time.Duration
	for _, s := range cfg.Servers {
		longest = max(longest, s.Timeout.D())
	}
	mode := session.ArgumentErrorsInBand
	if cfg.ArgumentErrors == "protocol" {
		mode = session.ArgumentErrorsProtocol
	}
	srv, err := session.NewServer(session.Options{
		Catalog:        g.SessionCatalog(enc, cursorKey, stdioPrincipal(cfg)),
		Relay:          g.SessionRelay(enc, cursorKey, stdioPrincipal(cfg)),
		Info:           info,
		Instructions:   front.Instructions,
		CallTimeout:    longest + time.Second, // the gateway's own deadlines come first
		MaxBatch:       cfg.Limits.Batch,
		Limits:         gateway.ArgumentLimits(),
		ArgumentErrors: mode,
		Logger:         log,
	})
	if err != nil {
		fmt.Fprintf(e.stderr, "bastion gateway: %v\n", err)
		return exitFailure
	}
	// A stdio client initializes the moment it has started the gateway,
	// and the answer is the session's one word on what is offered besides
	// tools (prompts, resources, completion): serving waits, bounded as
	// `bastion admit` is, until every server has settled.
	stdin, stdout, restore := e.stdio()
	defer restore()
	// A client that gives up before the wait is over has closed its end:
	// nothing is left to serve.
	inputClosed := func() bool { f, ok := stdin.(*os.File); return ok && stdio.InputClosed(f) }
	if waitSettled(ctx, g, cfg.Discovery.ListTimeout.D()+30*time.Second, e.signals, inputClosed, log) {
		return exitOK
	}
	if err := stdio.Serve(ctx, srv, stdin, stdout, int(cfg.Limits.Body), e.signals, log); err != nil {
		log.Error("session ended abnormally", slog.String("error", err.Error()))
		return exitFailure
	}
	return exitOK
}

// waitSettled waits until every server of g has been discovered or has
// failed closed, or limit has passed (then serving starts with what is
// offered by then). It reports true when ctx ended, a signal came or
// inputClosed reported the client gone first: the gateway then stops
// without serving.
func waitSettled(ctx context.Context, g *gateway.Gateway, limit time.Duration, signals <-chan os.Signal, inputClosed func() bool, log *slog.Logger) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !g.Ready() {
		select {
		case <-tick.C:
			if inputClosed() {
				log.Info("the client closed its input before the servers settled; stopping")
				return true
			}
		case <-deadline.C:
			log.Warn("not every server settled in time; serving what is offered", slog.Duration("waited", limit))
			return false
		case <-ctx.Done():
			return true
		case <-signals:
			return true
		}
	}
	return false
}

// sessionKey reads the sealing key from the variable the configuration
// names.
func sessionKey(cfg *gwconfig.Config, getenv func(string) (string, bool)) ([]byte, error) {
	v, ok := getenv(cfg.Sessions.KeyEnv)
	if !ok || v == "" {
		return nil, fmt.Errorf("%s: not set: the HTTP front needs a key of at least 32 bytes to seal session ids and cursors (for example: export %s=$(openssl rand -hex 32))",
			cfg.Sessions.KeyEnv, cfg.Sessions.KeyEnv)
	}
	if len(v) < 32 {
		return nil, fmt.Errorf("%s: is %d bytes long: at least 32 are required", cfg.Sessions.KeyEnv, len(v))
	}
	return []byte(v), nil
}

func gatewayLogger(cfg *gwconfig.Config, w io.Writer) *slog.Logger {
	levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
	return config.NewLogger(w, levels[cfg.Log.Level], cfg.Log.Format)
}

// missingCommands says, for --check, which stdio servers' commands could
// not be started here: a path (relative to the server's dir, else to the
// working directory) that is no executable file, or a name PATH does not
// hold. A server that cannot start fails closed at run time, so --check is
// where it is told.
func missingCommands(cfg *gwconfig.Config, getenv func(string) (string, bool)) []string {
	var out []string
	for i, s := range cfg.Servers {
		if !s.Stdio() {
			continue
		}
		name := s.Command[0]
		where := fmt.Sprintf("servers[%d].command[0]", i)
		if !strings.Contains(name, "/") {
			path, _ := getenv("PATH")
			if !onPath(name, path) {
				msg := fmt.Sprintf("%s: %s is not on PATH", where, name)
				// A name without a slash is only looked up on PATH, as a
				// shell does: a file of that name here is not it.
				dir := s.Dir
				if dir == "" {
					dir, _ = os.Getwd()
				}
				if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() {
					msg += fmt.Sprintf(" (for the file in the server's directory, write ./%s)", name)
				}
				out = append(out, msg)
			}
			continue
		}
		full, base := name, ""
		if !filepath.IsAbs(full) {
			base = s.Dir
			if base == "" {
				base, _ = os.Getwd()
			}
			full = filepath.Join(base, name)
		}
		switch fi, err := os.Stat(full); {
		case err != nil && base != "":
			out = append(out, fmt.Sprintf("%s: %s does not exist (a relative path is relative to %s)", where, name, base))
		case err != nil:
			out = append(out, fmt.Sprintf("%s: %s does not exist", where, name))
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			out = append(out, fmt.Sprintf("%s: %s is not an executable file", where, name))
		}
	}
	return out
}

// onPath reports whether an executable file name is in one of path's
// directories.
func onPath(name, path string) bool {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return true
		}
	}
	return false
}

// plural is n things: "1 server", "2 servers".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func serverNames(cfg *gwconfig.Config) string {
	names := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// lookupIn makes a getenv over KEY=value entries.
func lookupIn(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// stdioPrincipal is who the --stdio front's one client is.
func stdioPrincipal(cfg *gwconfig.Config) auth.Principal {
	if sp := cfg.Auth.StdioPrincipal; sp != nil {
		return auth.Principal{Subject: sp.Subject, Roles: sp.Roles, Issuer: "stdio"}
	}
	return front.Anonymous
}

// jwksClient fetches key sets: directly (never through the environment's
// proxy), following no redirect, within bounded time.
func jwksClient() *http.Client {
	return &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{Proxy: nil, TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 10 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
