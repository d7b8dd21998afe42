// Package sysmetrics implements the system_metrics tool: a read-only
// snapshot of host health (CPU utilisation and count, memory, disk usage of
// one configured path, load averages and uptime), read with gopsutil.
//
// Readings are clamped into their advertised ranges before they leave the
// package, because containers and VMs occasionally report slightly
// out-of-range values (a CPU at 100.4 %, a NaN percentage on an empty
// filesystem), and a reading outside the output schema would make a
// well-behaved client reject the whole result.
//
// The measured disk path is configuration, not data: it never appears in
// the tool's output, in its descriptor or in an error it returns. Errors
// are internal failures for the log; the peer only ever sees a generic
// -32603 for them.
//
// A call samples for a short interval (500 ms by default) and must finish
// within [SampleBudget]. gopsutil reads /proc and calls statfs without
// honouring a context, so a hung filesystem can still block a call in the
// kernel; only the CPU sampling interval is interruptible.
package sysmetrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mcp-bastion/bastion/internal/tool"
)

// Name is the tool's advertised name.
const Name = "system_metrics"

// DefaultCPUInterval is how long CPU utilisation is sampled for unless
// [WithCPUInterval] says otherwise.
const DefaultCPUInterval = 500 * time.Millisecond

// SampleBudget bounds one whole sample, CPU interval included. The call's
// own deadline may be shorter; it is never extended.
const SampleBudget = 2 * time.Second

// ErrSampleTimeout is returned when a sample does not finish within
// [SampleBudget] while the caller's context is still live. It is an
// internal failure: the host, not the caller, is at fault.
var ErrSampleTimeout = errors.New("sysmetrics: sample did not finish within " + SampleBudget.String())

// Input is the tool's (empty) argument object. Any member is refused.
type Input struct{}

// Output is the structured result of a call. Every percentage is in
// [0, 100].
type Output struct {
	CPUPercent    float64     `json:"cpu_percent"`
	CPUCount      int         `json:"cpu_count"`
	Memory        Memory      `json:"memory"`
	Disk          Disk        `json:"disk"`
	LoadAverage   LoadAverage `json:"load_average"`
	UptimeSeconds uint64      `json:"uptime_seconds"`
}

// Memory is virtual memory usage.
type Memory struct {
	TotalBytes     uint64  `json:"total_bytes"`
	UsedBytes      uint64  `json:"used_bytes"`
	AvailableBytes uint64  `json:"available_bytes"`
	Percent        float64 `json:"percent"`
}

// Disk is the usage of the filesystem holding the configured path.
type Disk struct {
	TotalBytes uint64  `json:"total_bytes"`
	UsedBytes  uint64  `json:"used_bytes"`
	FreeBytes  uint64  `json:"free_bytes"`
	Percent    float64 `json:"percent"`
}

// LoadAverage is the 1, 5 and 15 minute system load average.
type LoadAverage struct {
	One     float64 `json:"one"`
	Five    float64 `json:"five"`
	Fifteen float64 `json:"fifteen"`
}

// Option configures [New].
type Option func(*config)

type config struct {
	sampler  Sampler
	interval time.Duration
}

// WithSampler replaces the gopsutil sampler, so tests can feed readings
// the host would rarely produce.
func WithSampler(s Sampler) Option {
	return func(c *config) { c.sampler = s }
}

// WithCPUInterval sets how long CPU utilisation is sampled for. It must be
// positive (a zero interval makes gopsutil compare against process-global
// state from an earlier call) and shorter than [SampleBudget].
func WithCPUInterval(d time.Duration) Option {
	return func(c *config) { c.interval = d }
}

// inputSchema admits only the empty object.
const inputSchema = `{"type":"object","properties":{},"additionalProperties":false}`

// outputSchema describes [Output] exactly. Keep the two in step; the tests
// check that every object is closed and every member required.
const outputSchema = `{
  "type": "object",
  "properties": {
    "cpu_percent": {"type": "number", "minimum": 0, "maximum": 100, "description": "CPU utilisation over the sampling interval, all CPUs combined"},
    "cpu_count": {"type": "integer", "minimum": 1, "description": "Number of logical CPUs"},
    "memory": {
      "type": "object",
      "properties": {
        "total_bytes": {"type": "integer", "minimum": 0},
        "used_bytes": {"type": "integer", "minimum": 0},
        "available_bytes": {"type": "integer", "minimum": 0},
        "percent": {"type": "number", "minimum": 0, "maximum": 100}
      },
      "required": ["total_bytes", "used_bytes", "available_bytes", "percent"],
      "additionalProperties": false
    },
    "disk": {
      "type": "object",
      "properties": {
        "total_bytes": {"type": "integer", "minimum": 0},
        "used_bytes": {"type": "integer", "minimum": 0},
        "free_bytes": {"type": "integer", "minimum": 0},
        "percent": {"type": "number", "minimum": 0, "maximum": 100}
      },
      "required": ["total_bytes", "used_bytes", "free_bytes", "percent"],
      "additionalProperties": false
    },
    "load_average": {
      "type": "object",
      "properties": {
        "one": {"type": "number", "minimum": 0},
        "five": {"type": "number", "minimum": 0},
        "fifteen": {"type": "number", "minimum": 0}
      },
      "required": ["one", "five", "fifteen"],
      "additionalProperties": false
    },
    "uptime_seconds": {"type": "integer", "minimum": 0}
  },
  "required": ["cpu_percent", "cpu_count", "memory", "disk", "load_average", "uptime_seconds"],
  "additionalProperties": false
}`

// New returns the system_metrics tool measuring the filesystem that holds
// diskPath. diskPath must be an absolute path to an existing directory;
// it is checked once here so a bad MCP_METRICS_DISK_PATH stops start-up
// instead of failing every call. Error texts never contain diskPath.
//
// The returned tool is safe for concurrent use.
func New(diskPath string, opts ...Option) (tool.Tool, error) {
	c := config{sampler: gopsutilSampler{}, interval: DefaultCPUInterval}
	for _, o := range opts {
		o(&c)
	}
	if c.sampler == nil {
		return nil, errors.New("sysmetrics: nil sampler")
	}
	if c.interval <= 0 || c.interval >= SampleBudget {
		return nil, fmt.Errorf("sysmetrics: CPU interval must be in (0, %s), got %s", SampleBudget, c.interval)
	}
	if err := checkDiskPath(diskPath); err != nil {
		return nil, err
	}
	m := &metrics{sampler: c.sampler, interval: c.interval, diskPath: diskPath}
	d := tool.Descriptor{
		Name:  Name,
		Title: "System metrics",
		Description: fmt.Sprintf("Report a snapshot of host health: CPU utilisation sampled over %s, "+
			"logical CPU count, memory usage, usage of the configured disk, 1/5/15 minute load "+
			"averages and uptime. Takes no arguments. Percentages are in the range 0-100.", c.interval),
		InputSchema:  []byte(inputSchema),
		OutputSchema: []byte(outputSchema),
		Annotations:  tool.ReadOnly,
	}
	return tool.New(d, m.sample)
}

// checkDiskPath reports why diskPath cannot be measured. The messages name
// the setting, not its value: the path is never echoed.
func checkDiskPath(diskPath string) error {
	if diskPath == "" {
		return errors.New("sysmetrics: MCP_METRICS_DISK_PATH: is empty")
	}
	if !filepath.IsAbs(diskPath) {
		return errors.New("sysmetrics: MCP_METRICS_DISK_PATH: is a relative path")
	}
	fi, err := os.Stat(diskPath)
	if err != nil {
		return fmt.Errorf("sysmetrics: MCP_METRICS_DISK_PATH: %s", reason(err))
	}
	if !fi.IsDir() {
		return errors.New("sysmetrics: MCP_METRICS_DISK_PATH: is not a directory")
	}
	return nil
}

// reason describes err without any path it may carry: only a bare errno
// is trusted to be path-free, since *fs.PathError and gopsutil's wrapped
// errors embed the path in their text.
func reason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "unavailable"
}

// metrics is the tool body. It holds no mutable state, so calls may run in
// parallel.
type metrics struct {
	sampler  Sampler
	interval time.Duration
	diskPath string
}

func (m *metrics) sample(ctx context.Context, _ Input) (Output, error) {
	sctx, cancel := context.WithTimeoutCause(ctx, SampleBudget, ErrSampleTimeout)
	defer cancel()
	out, err := m.read(sctx)
	// The caller's own cancellation or deadline wins over anything the
	// sample reported, so the session can tell a peer's cancel from a
	// timeout; a reading finished after the caller gave up is dropped.
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Output{}, ctxErr
	}
	if err != nil {
		if sctx.Err() != nil {
			return Output{}, ErrSampleTimeout
		}
		return Output{}, err
	}
	return clamp(out), nil
}

// read takes one raw sample. The cheap readings come first so a
// cancellation usually lands in the interruptible CPU interval.
func (m *metrics) read(ctx context.Context) (Output, error) {
	var (
		out Output
		err error
	)
	if out.CPUCount, err = m.sampler.CPUCount(ctx); err != nil {
		return Output{}, fmt.Errorf("sysmetrics: cpu count: %w", err)
	}
	if out.Memory, err = m.sampler.Memory(ctx); err != nil {
		return Output{}, fmt.Errorf("sysmetrics: memory: %w", err)
	}
	if out.Disk, err = m.sampler.Disk(ctx, m.diskPath); err != nil {
		// Not wrapped: the error may name the path in its text or in a
		// *fs.PathError further down the chain.
		return Output{}, fmt.Errorf("sysmetrics: disk usage of MCP_METRICS_DISK_PATH: %s", reason(err))
	}
	if out.LoadAverage, err = m.sampler.LoadAverage(ctx); err != nil {
		return Output{}, fmt.Errorf("sysmetrics: load average: %w", err)
	}
	if out.UptimeSeconds, err = m.sampler.Uptime(ctx); err != nil {
		return Output{}, fmt.Errorf("sysmetrics: uptime: %w", err)
	}
	if err = ctx.Err(); err != nil {
		return Output{}, err
	}
	if out.CPUPercent, err = m.sampler.CPUPercent(ctx, m.interval); err != nil {
		return Output{}, fmt.Errorf("sysmetrics: cpu percent: %w", err)
	}
	return out, nil
}

// clamp forces every reading into the range the output schema advertises.
// Non-finite values must go in any case: JSON cannot carry them.
func clamp(o Output) Output {
	o.CPUPercent = percent(o.CPUPercent)
	o.CPUCount = max(o.CPUCount, 1)
	o.Memory = o.Memory.clamped()
	o.Disk.Percent = percent(o.Disk.Percent)
	o.LoadAverage.One = nonNegative(o.LoadAverage.One)
	o.LoadAverage.Five = nonNegative(o.LoadAverage.Five)
	o.LoadAverage.Fifteen = nonNegative(o.LoadAverage.Fifteen)
	return o
}

// clamped keeps used and available memory within the total. gopsutil
// computes used as total − available in unsigned arithmetic, which wraps to
// nearly 2^64 when a meminfo shim (LXCFS and the like) reports more
// available than total; such a reading is taken as nothing used.
func (m Memory) clamped() Memory {
	m.AvailableBytes = min(m.AvailableBytes, m.TotalBytes)
	if m.UsedBytes > m.TotalBytes {
		m.UsedBytes = m.TotalBytes - m.AvailableBytes
		m.Percent = 0
		if m.TotalBytes > 0 {
			m.Percent = float64(m.UsedBytes) / float64(m.TotalBytes) * 100
		}
	}
	m.Percent = percent(m.Percent)
	return m
}

// percent clamps v into [0, 100]; NaN becomes 0 and the infinities go to
// the nearer bound.
func percent(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return math.Min(math.Max(v, 0), 100)
}

// nonNegative clamps a load average. A load has no upper bound, so an
// infinity is as meaningless as NaN and both become 0.
func nonNegative(v float64) float64 {
	// v <= 0 rather than v < 0 also turns -0 into 0.
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0
	}
	return v
}
