// Package metrics is the gateway's Prometheus instrumentation, served on
// its own opt-in listen address (metrics.listen) so that the MCP endpoint
// never exposes it. Labels carry names only — methods, servers, tools the
// catalog holds, outcomes — never an argument, a result or a caller's
// free text: a tool name a caller made up is counted as "(unknown)", so
// callers cannot grow the label set.
//
// A nil *Metrics is valid and records nothing.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Unknown is the tool label of a call to a name the catalog does not hold.
const Unknown = "(unknown)"

// Metrics holds the gateway's collectors on a registry of its own (no
// global registry: two gateways in one process, as in tests, do not
// collide).
type Metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	requestTime   *prometheus.HistogramVec
	calls         *prometheus.CounterVec
	callTime      *prometheus.HistogramVec
	pages         *prometheus.CounterVec
	walkFailures  *prometheus.CounterVec
	walks         *prometheus.CounterVec
	decisions     *prometheus.CounterVec
	authFailures  prometheus.Counter
	rateLimited   prometheus.Counter
	downstreamsFn func() []Downstream
}

// Downstream is one server's state at scrape time.
type Downstream struct {
	Server     string
	Up         bool
	Tools      int
	Restarts   int
	Garbage    int64
	Oversized  int64
	Unexpected int64
	QueueFull  int64
	Refused    int64
}

// latency buckets: from well under a millisecond (the gateway's own
// overhead) to the longest call deadlines.
var buckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// New returns the gateway's metrics. downstreams is read at each scrape.
func New(downstreams func() []Downstream) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bastion_gateway_requests_total",
			Help: "MCP requests answered by the gateway's front, by JSON-RPC method and outcome.",
		}, []string{"method", "outcome"}),
		requestTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bastion_gateway_request_duration_seconds", Buckets: buckets,
			Help: "Time to answer an MCP request, by JSON-RPC method.",
		}, []string{"method"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bastion_gateway_tool_calls_total",
			Help: "tools/call through the gateway, by server, downstream tool name and outcome.",
		}, []string{"server", "tool", "outcome"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bastion_gateway_tool_call_duration_seconds", Buckets: buckets,
			Help: "Time from a tools/call reaching the invoke path to its answer, by server.",
		}, []string{"server"}),
		walks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bastion_gateway_discovery_walks_total",
			Help: "Walks of a server's tools/list, by server.",
		}, []string{"server"}),
		pages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bastion_gateway_discovery_pages_total",
			Help: "tools/list pages read from downstream servers, by server.",
		}, []string{"server"}),
		walkFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bastion_gateway_discovery_failures_total",
			Help: "Walks of a server's list that could not be completed (nothing of that server is then offered).",
		}, []string{"server"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bastion_gateway_decisions_total",
			Help: "Authorization decisions on tools/call, by deciding rule (\"\" when none matched) and outcome (allow, deny).",
		}, []string{"rule", "outcome"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bastion_gateway_authentication_failures_total",
			Help: "Requests refused with -32000: no, a malformed or an unknown token, or an invalid JWT.",
		}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bastion_gateway_rate_limited_total",
			Help: "Requests refused with -32005 because their principal exceeded its rate.",
		}),
		downstreamsFn: downstreams,
	}
	m.reg.MustRegister(m.requests, m.requestTime, m.calls, m.callTime, m.walks, m.pages, m.walkFailures,
		m.decisions, m.authFailures, m.rateLimited,
		&downstreamCollector{m: m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Request records one answered request. outcome is "ok", "error" (a
// JSON-RPC error answer, the code in code), "refused" (an HTTP refusal
// before the method was read) or "cancelled".
func (m *Metrics) Request(method, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(method, outcome).Inc()
	m.requestTime.WithLabelValues(method).Observe(d.Seconds())
}

// ToolCall records one tools/call. tool is the downstream's name, or
// Unknown; outcome is "ok", "is_error", "input_required",
// "invalid_arguments", "invalid_answers" (a retry whose requestState or
// inputResponses the gateway refused), "denied" (the policy refused it,
// -32001), "invalid_result", "bad_gateway", "timeout",
// "downstream_error", "cancelled" or "unknown_tool".
func (m *Metrics) ToolCall(server, tool, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(server, tool, outcome).Inc()
	m.callTime.WithLabelValues(server).Observe(d.Seconds())
}

// Decision records one authorization decision.
func (m *Metrics) Decision(rule string, allow bool) {
	if m == nil {
		return
	}
	outcome := "deny"
	if allow {
		outcome = "allow"
	}
	m.decisions.WithLabelValues(rule, outcome).Inc()
}

// AuthFailure records one refused authentication.
func (m *Metrics) AuthFailure() {
	if m != nil {
		m.authFailures.Inc()
	}
}

// RateLimited records one request refused for its principal's rate.
func (m *Metrics) RateLimited() {
	if m != nil {
		m.rateLimited.Inc()
	}
}

// Walk records one walk of a server's list: pages read, and whether it
// failed.
func (m *Metrics) Walk(server string, pages int, failed bool) {
	if m == nil {
		return
	}
	m.walks.WithLabelValues(server).Inc()
	m.pages.WithLabelValues(server).Add(float64(pages))
	if failed {
		m.walkFailures.WithLabelValues(server).Inc()
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: nil})
}

// Guard puts a handler served on the address bound behind a check of
// the requests it may answer (front.GuardListener: the front's Host and
// Origin guard).
type Guard func(bound string, h http.Handler, log *slog.Logger) http.Handler

// Serve serves /metrics on addr until ctx ends, behind guard (nil: none)
// given the address bound, so that a port 0 is the one chosen.
func (m *Metrics) Serve(ctx context.Context, addr string, guard Guard, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	var h http.Handler = mux
	if guard != nil {
		h = guard(ln.Addr().String(), mux, log)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("metrics listening", slog.String("listen", ln.Addr().String()))
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if e := <-done; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// downstreamCollector reads every server's state at scrape time.
type downstreamCollector struct{ m *Metrics }

var (
	upDesc = prometheus.NewDesc("bastion_gateway_downstream_up",
		"1 while the server is connected (handshake complete).", []string{"server"}, nil)
	toolsDesc = prometheus.NewDesc("bastion_gateway_downstream_tools",
		"Tools of the server the catalog offers.", []string{"server"}, nil)
	restartsDesc = prometheus.NewDesc("bastion_gateway_downstream_restarts_total",
		"Restarts (stdio) or re-initializations (HTTP) of the server's connection.", []string{"server"}, nil)
	droppedDesc = prometheus.NewDesc("bastion_gateway_downstream_dropped_messages_total",
		"Messages from the server that were dropped, by reason: garbage (not JSON-RPC), oversized, unexpected (a response to no call in flight), queue_full (a progress or log message for a caller that is not reading), too_many_requests (a request past the bound of one call's requests in flight, refused).",
		[]string{"server", "reason"}, nil)
)

func (c *downstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upDesc
	ch <- toolsDesc
	ch <- restartsDesc
	ch <- droppedDesc
}

func (c *downstreamCollector) Collect(ch chan<- prometheus.Metric) {
	if c.m.downstreamsFn == nil {
		return
	}
	for _, d := range c.m.downstreamsFn() {
		up := 0.0
		if d.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, d.Server)
		ch <- prometheus.MustNewConstMetric(toolsDesc, prometheus.GaugeValue, float64(d.Tools), d.Server)
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(d.Restarts), d.Server)
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(d.Garbage), d.Server, "garbage")
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(d.Oversized), d.Server, "oversized")
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(d.Unexpected), d.Server, "unexpected")
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(d.QueueFull), d.Server, "queue_full")
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(d.Refused), d.Server, "too_many_requests")
	}
}
