// Package session runs MCP sessions: the read loop, the protocol lifecycle
// of both eras, dispatch, one task per tools/call, cancellation and the
// graceful drain.
//
// A [Server] holds what every session shares: the tools, the rendered fixed
// results, the concurrency limiter and the settings. A [Session] serves one
// [Conn]. initialize, ping, tools/list and server/discover are answered
// inline, in arrival order, by the read loop; each tools/call becomes a task
// owned by the session, so responses may arrive out of order. A call is
// judged on its own on the read loop (its params, the tool's name, the
// structural sanitizer) before it is admitted against capacity and takes
// its place in the FIFO limiter's queue, in arrival order; its task then
// waits for the slot, runs under the execution deadline, and the tool
// decodes its arguments strictly. A 2025-03-26 batch is answered by one
// array (reply.go).
//
// The session never imports a tool: it calls the [tool.Tool] interface.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/guard"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// ArgumentErrorMode says how a session reports arguments that fail the
// sanitizer or the tool's input schema.
type ArgumentErrorMode int

const (
	// ArgumentErrorsInBand reports them as a tool result with isError
	// true, so the model can read the problem and correct itself (MCP
	// 2025-11-25). This is the default.
	ArgumentErrorsInBand ArgumentErrorMode = iota
	// ArgumentErrorsProtocol reports them as JSON-RPC -32602 with the
	// problem in error.data.
	ArgumentErrorsProtocol
)

// Defaults of [Options].
const (
	DefaultMaxConcurrency = 16
	DefaultQueueTimeout   = 5 * time.Second
	DefaultCallTimeout    = 30 * time.Second
	DefaultDrainGrace     = 5 * time.Second
	DefaultMaxBatch       = 64
	DefaultMaxBatchBytes  = 16 << 20
)

// Catalog is a set of tools that can change while the server runs, as a
// gateway's does. It renders its own tools/list (paginated as it likes)
// and tells the session of changes, which the session passes on to its
// client as notifications/tools/list_changed.
type Catalog interface {
	// List renders the tools/list result for version, from the page
	// cursor points at (nil for the first). A cursor it cannot use is an
	// error to answer with (its ID is set by the session).
	List(version string, cursor *string) ([]byte, *jsonrpc.Error)
	// Lookup finds a tool by name.
	Lookup(name string) (tool.Tool, bool)
	// Watch returns a channel that receives a value after each change,
	// and a func that stops it.
	Watch() (changes <-chan struct{}, stop func())
}

// Relay answers the requests a relaying server serves besides its tools:
// a gateway's prompts, resources and completion. The session runs each as
// a task of its own, as it runs a tools/call: off the read loop, answered
// in any order, cancellable by the client, counted against MaxPending and
// ended by the drain. It never holds a tool-call slot.
type Relay interface {
	// Offered is what the server declares besides tools, at this moment
	// (initialize and server/discover render it each time). A request of
	// a feature not offered when it arrives is answered -32601.
	Offered() mcp.Offered
	// Serve answers one request of method (one of [RelayedMethods]) for
	// the negotiated version: the result object, or the error to answer
	// with (the session sets its id). Nil and nil means ctx ended first;
	// the session then answers as for a cancelled or drained call.
	Serve(ctx context.Context, version, method string, params jsontext.Value) ([]byte, *jsonrpc.Error)
	// Watch reports changes of the prompt and resource lists the client
	// can see, and updates of the resources it subscribed to (or
	// follows), and returns a func that stops it.
	Watch() (changes <-chan Change, stop func())
	// Follow has the client follow the updates of each of uris, for the
	// resourceSubscriptions of a 2026-07-28 subscriptions/listen, and
	// returns those it now follows: one it may not follow is left out.
	// An error refuses the whole request (the session sets its id).
	// Following what the client already follows changes nothing.
	Follow(ctx context.Context, uris []string) ([]string, *jsonrpc.Error)
	// Unfollow ends the client's following of uris.
	Unfollow(ctx context.Context, uris []string)
}

// Change is one report of a [Relay]: the lists that changed (Prompts,
// Resources), or a resource the client subscribed to that was updated.
type Change struct {
	Lists mcp.Listen
	// Updated is the URI of the updated resource, "" for none.
	Updated string
}

// RelayedMethods are the request methods a [Relay] serves, by the
// feature of [mcp.Offered] each belongs to.
var RelayedMethods = map[string]func(mcp.Offered) bool{
	"prompts/list":             func(o mcp.Offered) bool { return o.Prompts },
	"prompts/get":              func(o mcp.Offered) bool { return o.Prompts },
	"resources/list":           func(o mcp.Offered) bool { return o.Resources },
	"resources/templates/list": func(o mcp.Offered) bool { return o.Resources },
	"resources/read":           func(o mcp.Offered) bool { return o.Resources },
	"resources/subscribe":      func(o mcp.Offered) bool { return o.Subscribe },
	"resources/unsubscribe":    func(o mcp.Offered) bool { return o.Subscribe },
	"completion/complete":      func(o mcp.Offered) bool { return o.Completions },
	"logging/setLevel":         func(o mcp.Offered) bool { return o.Logging },
}

// Options configure a Server. Zero durations and counts take the defaults.
type Options struct {
	// Tools are the tools offered, a fixed set. Either Tools or Catalog
	// is required.
	Tools *tool.Registry
	// Catalog is a changing set of tools; it replaces Tools.
	Catalog Catalog
	// Relay, if set, serves prompts, resources and completion beside the
	// tools, and declares them.
	Relay Relay
	// Info identifies the server to clients.
	Info mcp.Implementation
	// Instructions, if set, are offered to clients as model guidance.
	Instructions string

	// MaxConcurrency is the number of tool-call slots.
	MaxConcurrency int64
	// QueueTimeout bounds the FIFO wait for a slot.
	QueueTimeout time.Duration
	// MaxPending caps the tools/call requests held at once, running or
	// waiting for a slot (default 8 × MaxConcurrency). A call beyond it is
	// refused at once with MCP_CONCURRENCY_LIMIT, before any goroutine or
	// buffer is spent on it: the wait is bounded in time by QueueTimeout
	// and in size by this.
	MaxPending int
	// CallTimeout is the execution deadline of one tool call, counted
	// from when it gets a slot.
	CallTimeout time.Duration
	// DrainGrace is how long in-flight calls may run after input ends
	// or a drain starts, before they are cancelled.
	DrainGrace time.Duration
	// MaxBatch caps the members of a JSON-RPC batch (2025-03-26 only).
	MaxBatch int
	// MaxBatchBytes bounds the bytes of the answers a session holds
	// for its batches, each until its whole array is queued (default
	// 16 MiB). An answer that would pass it is not held: the member is
	// answered -32602 with an MCP_PAYLOAD_TOO_LARGE problem instead.
	MaxBatchBytes int
	// Limits bound the structure of tool arguments.
	Limits guard.Limits
	// ArgumentErrors selects how argument errors are reported.
	ArgumentErrors ArgumentErrorMode

	// Logger receives structured logs; nil discards them. It never
	// receives argument values.
	Logger *slog.Logger
}

// Server holds what all sessions share. It is safe for concurrent use.
type Server struct {
	opts    Options
	enc     *mcp.Encoder
	limiter *guard.Limiter
	log     *slog.Logger
}

// Tools returns the fixed tools the server offers, sorted by name; nil
// when it offers a catalog instead.
func (s *Server) Tools() []tool.Tool {
	if s.opts.Catalog != nil || s.opts.Tools == nil {
		return nil
	}
	return s.opts.Tools.Tools()
}

// lookup finds a tool in whichever set the server offers.
func (s *Server) lookup(name string) (tool.Tool, bool) {
	if s.opts.Catalog != nil {
		return s.opts.Catalog.Lookup(name)
	}
	return s.opts.Tools.Lookup(name)
}

// NewServer validates opts, fills in defaults and renders the fixed results.
func NewServer(opts Options) (*Server, error) {
	if (opts.Tools == nil) == (opts.Catalog == nil) {
		return nil, errors.New("session: exactly one of Options.Tools and Options.Catalog is required")
	}
	if opts.Info.Name == "" || opts.Info.Version == "" {
		return nil, errors.New("session: Options.Info needs a name and a version")
	}
	if opts.MaxConcurrency <= 0 {
		opts.MaxConcurrency = DefaultMaxConcurrency
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 8 * int(opts.MaxConcurrency)
	}
	if opts.QueueTimeout <= 0 {
		opts.QueueTimeout = DefaultQueueTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.DrainGrace <= 0 {
		opts.DrainGrace = DefaultDrainGrace
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if opts.Limits == (guard.Limits{}) {
		opts.Limits = guard.DefaultLimits()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		descs   []tool.Descriptor
		encOpts []mcp.EncoderOption
	)
	if opts.Tools != nil {
		for _, t := range opts.Tools.Tools() {
			descs = append(descs, t.Descriptor())
		}
	} else {
		encOpts = append(encOpts, mcp.ToolsListChanged())
	}
	if opts.Relay != nil {
		encOpts = append(encOpts, mcp.OfferedBy(opts.Relay.Offered))
	}
	enc, err := mcp.NewEncoder(opts.Info, opts.Instructions, descs, encOpts...)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return &Server{
		opts:    opts,
		enc:     enc,
		limiter: guard.NewLimiter(opts.MaxConcurrency, opts.QueueTimeout),
		log:     log,
	}, nil
}
