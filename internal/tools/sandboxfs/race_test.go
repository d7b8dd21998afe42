//go:build linux

package sandboxfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/sys/unix"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// TestSwapRace swaps a directory inside the sandbox for a symlink to the
// outside, over and over, while concurrent reads go through it. A reader
// may see the directory (and read the inside file) or the symlink (and be
// refused); it must never see the outside file. The swapper runs for as
// long as the readers do; everything is bounded by iteration counts and
// nothing waits on time.
func TestSwapRace(t *testing.T) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) { testSwapRace(t, bk.b) })
	}
}

func testSwapRace(t *testing.T, b backend) {
	const (
		readers        = 8
		readsPerReader = 1000
		maxSwaps       = 1_000_000 // a bound only: swapping stops when reading does
	)
	f := newFixture(t)
	at := func(rel string) string { return filepath.Join(f.data, rel) }
	if err := os.MkdirAll(at("swap/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	const inside = "inside the sandbox\n"
	if err := os.WriteFile(at("swap/target.txt"), []byte(inside), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.base, "outside/target.txt"), []byte(f.marker), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two ways out: a relative symlink and an absolute one.
	if err := os.Symlink("../outside", at("swap-rel")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(f.base, "outside"), at("swap-abs")); err != nil {
		t.Fatal(err)
	}
	r := f.reader(t, b)

	// RENAME_EXCHANGE swaps two names atomically, so "swap" always exists
	// and is alternately the directory and a symlink. Where the
	// filesystem lacks it, two renames leave a window where it is missing.
	exchange := func(a, b string) error {
		return unix.Renameat2(unix.AT_FDCWD, at(a), unix.AT_FDCWD, at(b), unix.RENAME_EXCHANGE)
	}
	if err := exchange("swap", "swap-rel"); err != nil {
		t.Logf("RENAME_EXCHANGE unavailable (%v); swapping with two renames", err)
		exchange = func(a, b string) error {
			if err := os.Rename(at(a), at("swap-tmp")); err != nil {
				return err
			}
			if err := os.Rename(at(b), at(a)); err != nil {
				return err
			}
			return os.Rename(at("swap-tmp"), at(b))
		}
	} else if err := exchange("swap", "swap-rel"); err != nil {
		t.Fatal(err)
	}

	paths := []string{
		"swap/target.txt",
		"swap/./target.txt",
		"swap/sub/../target.txt",
		"swap/../swap/target.txt",
	}
	var (
		swapper, reading sync.WaitGroup
		readersDone      atomic.Bool
		swaps            atomic.Int64
		counts           [4]atomic.Int64 // ok, denied, not found, other
		swapErr          error
	)
	swapper.Go(func() {
		for swaps.Load() < maxSwaps && !readersDone.Load() {
			for _, link := range []string{"swap-rel", "swap-rel", "swap-abs", "swap-abs"} {
				if err := exchange("swap", link); err != nil {
					swapErr = err
					return
				}
			}
			swaps.Add(1)
		}
	})
	for i := range readers {
		reading.Go(func() {
			for n := range readsPerReader {
				args := argsFor(t, paths[(i+n)%len(paths)], 0, "")
				res, err := r.Call(context.Background(), jsontext.Value(args))
				visible := string(res.Structured)
				if err != nil {
					visible = err.Error()
				}
				if strings.Contains(visible, f.marker) {
					t.Errorf("read through the swapped directory returned the outside file: %s", visible)
					return
				}
				var p *problem.Problem
				switch {
				case err == nil:
					if !strings.Contains(visible, `"content":"inside the sandbox\n"`) {
						t.Errorf("unexpected content: %s", visible)
					}
					counts[0].Add(1)
				case errors.As(err, &p) && p.Code == problem.AccessDenied:
					counts[1].Add(1)
				case errors.As(err, &p) && p.Code == problem.NotFound:
					counts[2].Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
					counts[3].Add(1)
				}
			}
		})
	}
	reading.Wait()
	readersDone.Store(true)
	swapper.Wait()
	if swapErr != nil {
		t.Fatal(swapErr)
	}
	t.Logf("%d swap cycles; read %d, denied %d, not found %d, other %d", swaps.Load(),
		counts[0].Load(), counts[1].Load(), counts[2].Load(), counts[3].Load())
}
