package sysmetrics

import (
	"context"
	"errors"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"
)

// Sampler reads raw host metrics. Its readings may be out of range; the
// tool clamps them. Implementations must be safe for concurrent use and
// should return promptly, with ctx's error, once ctx is done.
type Sampler interface {
	// CPUPercent returns the utilisation of all CPUs combined, measured
	// over interval.
	CPUPercent(ctx context.Context, interval time.Duration) (float64, error)
	// CPUCount returns the number of logical CPUs.
	CPUCount(ctx context.Context) (int, error)
	// Memory returns virtual memory usage.
	Memory(ctx context.Context) (Memory, error)
	// Disk returns the usage of the filesystem holding path. Its errors
	// may name path; the tool never passes them on.
	Disk(ctx context.Context, path string) (Disk, error)
	// LoadAverage returns the 1, 5 and 15 minute load averages.
	LoadAverage(ctx context.Context) (LoadAverage, error)
	// Uptime returns the seconds since boot.
	Uptime(ctx context.Context) (uint64, error)
}

// gopsutilSampler is the real Sampler. It always uses the *WithContext
// functions, though on Linux only the CPU interval actually waits on ctx.
type gopsutilSampler struct{}

var _ Sampler = gopsutilSampler{}

func (gopsutilSampler) CPUPercent(ctx context.Context, interval time.Duration) (float64, error) {
	p, err := cpu.PercentWithContext(ctx, interval, false)
	if err != nil {
		return 0, err
	}
	// With percpu false gopsutil returns one combined value; anything
	// else means it could not read the counters.
	if len(p) != 1 {
		return 0, errors.New("no combined CPU reading")
	}
	return p[0], nil
}

func (gopsutilSampler) CPUCount(ctx context.Context) (int, error) {
	return cpu.CountsWithContext(ctx, true)
}

func (gopsutilSampler) Memory(ctx context.Context) (Memory, error) {
	v, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return Memory{}, err
	}
	return Memory{
		TotalBytes:     v.Total,
		UsedBytes:      v.Used,
		AvailableBytes: v.Available,
		Percent:        v.UsedPercent,
	}, nil
}

func (gopsutilSampler) Disk(ctx context.Context, path string) (Disk, error) {
	u, err := disk.UsageWithContext(ctx, path)
	if err != nil {
		return Disk{}, err
	}
	return Disk{
		TotalBytes: u.Total,
		UsedBytes:  u.Used,
		FreeBytes:  u.Free,
		Percent:    u.UsedPercent,
	}, nil
}

func (gopsutilSampler) LoadAverage(ctx context.Context) (LoadAverage, error) {
	a, err := load.AvgWithContext(ctx)
	if err != nil {
		return LoadAverage{}, err
	}
	return LoadAverage{One: a.Load1, Five: a.Load5, Fifteen: a.Load15}, nil
}

func (gopsutilSampler) Uptime(ctx context.Context) (uint64, error) {
	return host.UptimeWithContext(ctx)
}
