package sysmetrics

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/goleak"

	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// secretDirName is distinctive enough that finding it anywhere in a result
// can only mean the configured path leaked.
const secretDirName = "bastion-secret-disk-7f3a91c2"

// secretDir returns a fresh directory whose path contains secretDirName.
func secretDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), secretDirName)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newTool(t *testing.T, diskPath string, opts ...Option) tool.Tool {
	t.Helper()
	tl, err := New(diskPath, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tl
}

func decode(t *testing.T, structured jsontext.Value) Output {
	t.Helper()
	var out Output
	if err := json.Unmarshal(structured, &out, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("decode %s: %v", structured, err)
	}
	return out
}

// fakeSampler returns fixed readings, or blocks until ctx is done when
// block is set, so tests control what the host "reports".
type fakeSampler struct {
	out   Output
	err   map[string]error // by method name
	block bool
	calls atomic.Int32
}

func (f *fakeSampler) fail(name string) error {
	f.calls.Add(1)
	return f.err[name]
}

func (f *fakeSampler) CPUPercent(ctx context.Context, _ time.Duration) (float64, error) {
	if err := f.fail("CPUPercent"); err != nil {
		return 0, err
	}
	if f.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return f.out.CPUPercent, nil
}

func (f *fakeSampler) CPUCount(context.Context) (int, error) {
	return f.out.CPUCount, f.fail("CPUCount")
}

func (f *fakeSampler) Memory(context.Context) (Memory, error) {
	return f.out.Memory, f.fail("Memory")
}

func (f *fakeSampler) Disk(context.Context, string) (Disk, error) {
	return f.out.Disk, f.fail("Disk")
}

func (f *fakeSampler) LoadAverage(context.Context) (LoadAverage, error) {
	return f.out.LoadAverage, f.fail("LoadAverage")
}

func (f *fakeSampler) Uptime(context.Context) (uint64, error) {
	return f.out.UptimeSeconds, f.fail("Uptime")
}

// inRange is a plausible reading that clamping must leave alone.
var inRange = Output{
	CPUPercent:    12.5,
	CPUCount:      8,
	Memory:        Memory{TotalBytes: 16 << 30, UsedBytes: 4 << 30, AvailableBytes: 12 << 30, Percent: 25},
	Disk:          Disk{TotalBytes: 100 << 30, UsedBytes: 40 << 30, FreeBytes: 60 << 30, Percent: 40},
	LoadAverage:   LoadAverage{One: 0.5, Five: 0.25, Fifteen: 0.125},
	UptimeSeconds: 3600,
}

func TestRealSample(t *testing.T) {
	dir := secretDir(t)
	tests := []struct {
		name string
		opts []Option
	}{
		{"default interval", nil},
		{"short interval", []Option{WithCPUInterval(50 * time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tl := newTool(t, dir, tt.opts...)
			res, err := tl.Call(t.Context(), jsontext.Value(`{}`))
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if err := tool.ValidateOutput(tl, res.Structured); err != nil {
				t.Fatalf("output does not match the output schema: %v\n%s", err, res.Structured)
			}
			out := decode(t, res.Structured)
			for name, p := range map[string]float64{
				"cpu_percent":    out.CPUPercent,
				"memory.percent": out.Memory.Percent,
				"disk.percent":   out.Disk.Percent,
			} {
				if p < 0 || p > 100 {
					t.Errorf("%s = %v, want within [0, 100]", name, p)
				}
			}
			if out.CPUCount < 1 {
				t.Errorf("cpu_count = %d, want >= 1", out.CPUCount)
			}
			if out.Memory.TotalBytes == 0 || out.Memory.UsedBytes > out.Memory.TotalBytes {
				t.Errorf("memory = %+v, want a positive total not exceeded by used", out.Memory)
			}
			if out.Disk.TotalBytes == 0 {
				t.Errorf("disk = %+v, want a positive total", out.Disk)
			}
			if l := out.LoadAverage; l.One < 0 || l.Five < 0 || l.Fifteen < 0 {
				t.Errorf("load_average = %+v, want all >= 0", l)
			}
			if out.UptimeSeconds == 0 {
				t.Errorf("uptime_seconds = 0, want the host's uptime")
			}
		})
	}
}

func TestClamping(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name string
		raw  func(*Output)
		want func(*Output)
	}{
		{"in range untouched", func(*Output) {}, func(*Output) {}},
		{"cpu over 100", func(o *Output) { o.CPUPercent = 100.4 }, func(o *Output) { o.CPUPercent = 100 }},
		{"cpu negative", func(o *Output) { o.CPUPercent = -0.1 }, func(o *Output) { o.CPUPercent = 0 }},
		{"cpu NaN", func(o *Output) { o.CPUPercent = nan }, func(o *Output) { o.CPUPercent = 0 }},
		{"cpu +Inf", func(o *Output) { o.CPUPercent = inf }, func(o *Output) { o.CPUPercent = 100 }},
		{"cpu -Inf", func(o *Output) { o.CPUPercent = -inf }, func(o *Output) { o.CPUPercent = 0 }},
		{"cpu count zero", func(o *Output) { o.CPUCount = 0 }, func(o *Output) { o.CPUCount = 1 }},
		{"cpu count negative", func(o *Output) { o.CPUCount = -3 }, func(o *Output) { o.CPUCount = 1 }},
		{"memory over 100", func(o *Output) { o.Memory.Percent = 100.0001 }, func(o *Output) { o.Memory.Percent = 100 }},
		{"memory NaN", func(o *Output) { o.Memory.Percent = nan }, func(o *Output) { o.Memory.Percent = 0 }},
		{
			// gopsutil's total - available, wrapped: a shim reported more
			// available than total.
			"memory available above total",
			func(o *Output) {
				o.Memory = Memory{TotalBytes: 1024000, UsedBytes: 1<<64 - 1024000, AvailableBytes: 2048000, Percent: 100}
			},
			func(o *Output) { o.Memory = Memory{TotalBytes: 1024000, AvailableBytes: 1024000} },
		},
		{"disk negative", func(o *Output) { o.Disk.Percent = -5 }, func(o *Output) { o.Disk.Percent = 0 }},
		{"disk NaN", func(o *Output) { o.Disk.Percent = nan }, func(o *Output) { o.Disk.Percent = 0 }},
		{"disk over 100", func(o *Output) { o.Disk.Percent = 250 }, func(o *Output) { o.Disk.Percent = 100 }},
		{
			"load negative, NaN, Inf",
			func(o *Output) { o.LoadAverage = LoadAverage{One: -0.01, Five: nan, Fifteen: inf} },
			func(o *Output) { o.LoadAverage = LoadAverage{} },
		},
		{"load negative zero", func(o *Output) { o.LoadAverage.One = math.Copysign(0, -1) }, func(o *Output) { o.LoadAverage.One = 0 }},
		{"load above cpu count kept", func(o *Output) { o.LoadAverage.One = 64.5 }, func(o *Output) { o.LoadAverage.One = 64.5 }},
	}
	dir := secretDir(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, want := inRange, inRange
			tt.raw(&raw)
			tt.want(&want)
			tl := newTool(t, dir, WithSampler(&fakeSampler{out: raw}))
			res, err := tl.Call(t.Context(), jsontext.Value(`{}`))
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if err := tool.ValidateOutput(tl, res.Structured); err != nil {
				t.Fatalf("output does not match the output schema: %v\n%s", err, res.Structured)
			}
			if got := decode(t, res.Structured); got != want {
				t.Errorf("output mismatch (-want +got):\n-%+v\n+%+v", want, got)
			}
			// -0 would be valid JSON, but the output should not depend on
			// the sign of a zero the host happened to report.
			if bytes.Contains(res.Structured, []byte("-0")) {
				t.Errorf("output carries a negative zero: %s", res.Structured)
			}
		})
	}
}

func TestArguments(t *testing.T) {
	tests := []struct {
		name       string
		args       string
		wantParams []string // nil means the call must succeed
	}{
		{"empty object", `{}`, nil},
		{"extra argument", `{"x":1}`, []string{"x"}},
		{"output field as argument", `{"cpu_percent":1}`, []string{"cpu_percent"}},
		{"not an object", `[]`, []string{}},
	}
	dir := secretDir(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &fakeSampler{out: inRange}
			tl := newTool(t, dir, WithSampler(s))
			_, err := tl.Call(t.Context(), jsontext.Value(tt.args))
			if tt.wantParams == nil {
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				return
			}
			var ae *tool.ArgumentError
			if !errors.As(err, &ae) {
				t.Fatalf("Call error = %v (%T), want *tool.ArgumentError", err, err)
			}
			if ae.Problem.Code != problem.Validation {
				t.Errorf("problem code = %s, want %s", ae.Problem.Code, problem.Validation)
			}
			if !slices.Equal(ae.Problem.InvalidParams, tt.wantParams) {
				t.Errorf("invalid_params = %q, want %q", ae.Problem.InvalidParams, tt.wantParams)
			}
			// Refused arguments must not cost a sample.
			if n := s.calls.Load(); n != 0 {
				t.Errorf("sampler called %d times for refused arguments", n)
			}
		})
	}
}

func TestDiskPathNeverEchoed(t *testing.T) {
	dir := secretDir(t)
	pathErr := &fs.PathError{Op: "statfs", Path: dir, Err: syscall.ENOENT}
	tests := []struct {
		name    string
		sampler Sampler  // nil means the real one
		remove  bool     // remove dir after New, so the real statfs fails
		wantErr []string // substrings of the error; nil means success
	}{
		{name: "real sample", sampler: nil},
		{name: "fake sample", sampler: &fakeSampler{out: inRange}},
		{
			name:    "disk error naming the path",
			sampler: &fakeSampler{out: inRange, err: map[string]error{"Disk": pathErr}},
			wantErr: []string{"MCP_METRICS_DISK_PATH", syscall.ENOENT.Error()},
		},
		{
			name:    "disk error text naming the path",
			sampler: &fakeSampler{out: inRange, err: map[string]error{"Disk": errors.New("cannot stat " + dir)}},
			wantErr: []string{"MCP_METRICS_DISK_PATH", "unavailable"},
		},
		{
			name:    "real statfs failure",
			remove:  true,
			wantErr: []string{"MCP_METRICS_DISK_PATH", syscall.ENOENT.Error()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dir
			if tt.remove {
				d = secretDir(t)
			}
			var opts []Option
			if tt.sampler != nil {
				opts = append(opts, WithSampler(tt.sampler))
			}
			tl := newTool(t, d, append(opts, WithCPUInterval(10*time.Millisecond))...)
			desc := tl.Descriptor()
			for _, s := range []string{desc.Title, desc.Description, string(desc.InputSchema), string(desc.OutputSchema)} {
				if strings.Contains(s, secretDirName) {
					t.Errorf("descriptor contains the disk path: %s", s)
				}
			}
			if tt.remove {
				if err := os.Remove(d); err != nil {
					t.Fatal(err)
				}
			}
			res, err := tl.Call(t.Context(), jsontext.Value(`{}`))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
				if bytes.Contains(res.Structured, []byte(secretDirName)) {
					t.Errorf("structured output contains the disk path: %s", res.Structured)
				}
				return
			}
			if err == nil {
				t.Fatalf("Call succeeded, want an error")
			}
			if strings.Contains(err.Error(), secretDirName) {
				t.Errorf("error text contains the disk path: %v", err)
			}
			var pe *fs.PathError
			if errors.As(err, &pe) {
				t.Errorf("error chain still holds a *fs.PathError: %v", pe)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestSamplerErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		method string
		want   string
	}{
		{"CPUCount", "sysmetrics: cpu count: boom"},
		{"Memory", "sysmetrics: memory: boom"},
		{"LoadAverage", "sysmetrics: load average: boom"},
		{"Uptime", "sysmetrics: uptime: boom"},
		{"CPUPercent", "sysmetrics: cpu percent: boom"},
	}
	dir := secretDir(t)
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			s := &fakeSampler{out: inRange, err: map[string]error{tt.method: boom}}
			tl := newTool(t, dir, WithSampler(s))
			_, err := tl.Call(t.Context(), jsontext.Value(`{}`))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Call error = %v, want %q", err, tt.want)
			}
			// An internal failure must not masquerade as a problem the
			// peer could act on.
			var p *problem.Problem
			if errors.As(err, &p) {
				t.Errorf("internal failure carries a problem: %v", p)
			}
		})
	}
}

// entrySampler wraps the real sampler and reports when CPUPercent starts
// and what the real call returned, so a test can cancel mid-interval and
// see that gopsutil itself honoured ctx.
type entrySampler struct {
	Sampler
	entered chan struct{}
	inner   chan error
}

func (e entrySampler) CPUPercent(ctx context.Context, d time.Duration) (float64, error) {
	close(e.entered)
	p, err := e.Sampler.CPUPercent(ctx, d)
	e.inner <- err
	return p, err
}

func TestRealSamplerCancellation(t *testing.T) {
	t.Run("already cancelled", func(t *testing.T) {
		tl := newTool(t, secretDir(t))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := tl.Call(ctx, jsontext.Value(`{}`)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Call error = %v, want context.Canceled", err)
		}
	})
	t.Run("during CPU interval", func(t *testing.T) {
		es := entrySampler{Sampler: gopsutilSampler{}, entered: make(chan struct{}), inner: make(chan error, 1)}
		// The longest interval allowed, so a sampler that ignored ctx
		// would visibly finish its sample instead of failing.
		tl := newTool(t, secretDir(t), WithSampler(es), WithCPUInterval(SampleBudget-time.Millisecond))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := tl.Call(ctx, jsontext.Value(`{}`))
			done <- err
		}()
		<-es.entered
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Call error = %v, want exactly context.Canceled", err)
		}
		if err := <-es.inner; !errors.Is(err, context.Canceled) {
			t.Errorf("gopsutil CPU sample returned %v, want context.Canceled", err)
		}
	})
}

func TestDeadlines(t *testing.T) {
	tests := []struct {
		name   string
		parent func(context.Context) (context.Context, context.CancelFunc)
		cancel bool // cancel the parent once the sampler blocks
		want   error
	}{
		{
			name:   "caller cancels",
			parent: context.WithCancel,
			cancel: true,
			want:   context.Canceled,
		},
		{
			name: "caller deadline shorter than the budget",
			parent: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, SampleBudget/2)
			},
			want: context.DeadlineExceeded,
		},
		{
			name:   "sample budget",
			parent: context.WithCancel,
			want:   ErrSampleTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := secretDir(t)
			// synctest's fake clock lets the 2 s budget pass without
			// sleeping.
			synctest.Test(t, func(t *testing.T) {
				tl := newTool(t, dir, WithSampler(&fakeSampler{out: inRange, block: true}))
				ctx, cancel := tt.parent(context.Background())
				defer cancel()
				start := time.Now()
				done := make(chan error, 1)
				go func() {
					_, err := tl.Call(ctx, jsontext.Value(`{}`))
					done <- err
				}()
				synctest.Wait()
				if tt.cancel {
					cancel()
				}
				err := <-done
				if err != tt.want {
					t.Errorf("Call error = %v, want exactly %v", err, tt.want)
				}
				if elapsed := time.Since(start); elapsed > SampleBudget {
					t.Errorf("Call took %s of fake time, want at most %s", elapsed, SampleBudget)
				}
			})
		})
	}
}

func TestNew(t *testing.T) {
	dir := secretDir(t)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		opts    []Option
		wantErr string // "" means success
	}{
		{"directory", dir, nil, ""},
		{"empty", "", nil, "sysmetrics: MCP_METRICS_DISK_PATH: is empty"},
		{"relative", secretDirName, nil, "sysmetrics: MCP_METRICS_DISK_PATH: is a relative path"},
		{"missing", filepath.Join(dir, "missing"), nil, "sysmetrics: MCP_METRICS_DISK_PATH: no such file or directory"},
		{"file", file, nil, "sysmetrics: MCP_METRICS_DISK_PATH: is not a directory"},
		{"nil sampler", dir, []Option{WithSampler(nil)}, "sysmetrics: nil sampler"},
		{"zero interval", dir, []Option{WithCPUInterval(0)}, "sysmetrics: CPU interval must be in (0, 2s), got 0s"},
		{"interval at budget", dir, []Option{WithCPUInterval(SampleBudget)}, "sysmetrics: CPU interval must be in (0, 2s), got 2s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := New(tt.path, tt.opts...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				d := tl.Descriptor()
				if d.Name != "system_metrics" || d.Title == "" || d.Description == "" {
					t.Errorf("descriptor name/title/description = %q/%q/%q", d.Name, d.Title, d.Description)
				}
				if d.Annotations != tool.ReadOnly {
					t.Errorf("annotations = %+v, want tool.ReadOnly", d.Annotations)
				}
				if !strings.Contains(d.Description, "500ms") {
					t.Errorf("description does not state the default interval: %q", d.Description)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("New error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestSchemas(t *testing.T) {
	tl := newTool(t, secretDir(t))
	d := tl.Descriptor()
	if got, want := string(d.InputSchema), `{"type":"object","properties":{},"additionalProperties":false}`; got != want {
		t.Errorf("input schema = %s, want %s", got, want)
	}
	if _, err := tool.CompileSchema("output", d.OutputSchema); err != nil {
		t.Fatalf("output schema does not compile: %v", err)
	}
	var root map[string]any
	if err := json.Unmarshal(d.OutputSchema, &root); err != nil {
		t.Fatal(err)
	}
	checkClosed(t, "#", root)

	// The schema must describe Output exactly: every field of a zero
	// Output is present and nothing else is allowed.
	zero, err := json.Marshal(Output{CPUCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := tool.ValidateOutput(tl, zero); err != nil {
		t.Errorf("zero output rejected: %v", err)
	}
	for _, bad := range []string{
		`{"cpu_percent":0,"cpu_count":1,"memory":{"total_bytes":0,"used_bytes":0,"available_bytes":0,"percent":0},"disk":{"total_bytes":0,"used_bytes":0,"free_bytes":0,"percent":0},"load_average":{"one":0,"five":0,"fifteen":0},"uptime_seconds":0,"extra":1}`,
		`{"cpu_percent":0,"cpu_count":1,"memory":{"total_bytes":0,"used_bytes":0,"available_bytes":0,"percent":0,"x":1},"disk":{"total_bytes":0,"used_bytes":0,"free_bytes":0,"percent":0},"load_average":{"one":0,"five":0,"fifteen":0},"uptime_seconds":0}`,
		`{"cpu_percent":100.5,"cpu_count":1,"memory":{"total_bytes":0,"used_bytes":0,"available_bytes":0,"percent":0},"disk":{"total_bytes":0,"used_bytes":0,"free_bytes":0,"percent":0},"load_average":{"one":0,"five":0,"fifteen":0},"uptime_seconds":0}`,
		`{"cpu_percent":0,"cpu_count":0,"memory":{"total_bytes":0,"used_bytes":0,"available_bytes":0,"percent":0},"disk":{"total_bytes":0,"used_bytes":0,"free_bytes":0,"percent":0},"load_average":{"one":0,"five":0,"fifteen":0},"uptime_seconds":0}`,
	} {
		if err := tool.ValidateOutput(tl, jsontext.Value(bad)); err == nil {
			t.Errorf("output schema accepted %s", bad)
		}
	}
}

// checkClosed asserts that every object schema under s forbids additional
// properties and requires every property it declares.
func checkClosed(t *testing.T, at string, s map[string]any) {
	t.Helper()
	if s["type"] != "object" {
		return
	}
	if s["additionalProperties"] != false {
		t.Errorf("%s: additionalProperties = %v, want false", at, s["additionalProperties"])
	}
	props, _ := s["properties"].(map[string]any)
	var required []string
	reqs, _ := s["required"].([]any)
	for _, r := range reqs {
		required = append(required, r.(string))
	}
	for name, p := range props {
		if !slices.Contains(required, name) {
			t.Errorf("%s: property %q is not required", at, name)
		}
		checkClosed(t, at+"/"+name, p.(map[string]any))
	}
	if len(required) != len(props) {
		t.Errorf("%s: required %q does not match the properties", at, required)
	}
}
