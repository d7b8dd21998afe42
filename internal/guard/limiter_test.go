package guard

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// acquired is what a waiter goroutine reports once Acquire returns.
type acquired struct {
	id      int
	release func()
	err     error
}

// mustAcquire takes a slot that must be free and returns its release.
func mustAcquire(t *testing.T, l *Limiter) func() {
	t.Helper()
	release, err := l.Acquire(t.Context())
	if err != nil {
		t.Fatalf("Acquire() = %v, want a free slot", err)
	}
	return release
}

// startWaiter calls Acquire in a new goroutine, which reports to out, and
// returns once that goroutine is blocked in the queue.
func startWaiter(ctx context.Context, l *Limiter, id int, out chan<- acquired) {
	go func() {
		release, err := l.Acquire(ctx)
		out <- acquired{id: id, release: release, err: err}
	}()
	synctest.Wait()
}

// noneReady fails if any waiter has returned.
func noneReady(t *testing.T, got <-chan acquired) {
	t.Helper()
	select {
	case a := <-got:
		t.Fatalf("waiter %d returned (err %v) while no slot was free", a.id, a.err)
	default:
	}
}

func TestLimiterFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slots, waiters = 3, 8
		l := NewLimiter(slots, time.Hour)
		var held []func()
		for range slots {
			held = append(held, mustAcquire(t, l))
		}
		start := time.Now()

		got := make(chan acquired, waiters)
		for id := range waiters {
			startWaiter(t.Context(), l, id, got)
		}
		noneReady(t, got)

		// Each release must admit exactly the oldest waiter still queued.
		for want := range waiters {
			held[0]()
			held = held[1:]
			synctest.Wait()
			select {
			case a := <-got:
				if a.err != nil {
					t.Fatalf("waiter %d: Acquire() = %v", a.id, a.err)
				}
				if a.id != want {
					t.Fatalf("slot went to waiter %d, want %d", a.id, want)
				}
				held = append(held, a.release)
			default:
				t.Fatalf("no waiter got the slot released for waiter %d", want)
			}
			noneReady(t, got)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("fake clock moved %v; waiters must not have timed out", d)
		}
		for _, release := range held {
			release()
		}
	})
}

// TestLimiterNoOvertaking checks that a newcomer cannot take a freed slot
// ahead of a caller already queued.
func TestLimiterNoOvertaking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1, time.Hour)
		release := mustAcquire(t, l)
		got := make(chan acquired, 2)
		startWaiter(t.Context(), l, 0, got)
		release()
		startWaiter(t.Context(), l, 1, got)
		first := <-got
		if first.id != 0 || first.err != nil {
			t.Fatalf("first to return: waiter %d, err %v; want waiter 0 with a slot", first.id, first.err)
		}
		noneReady(t, got)
		first.release()
		second := <-got
		if second.id != 1 || second.err != nil {
			t.Fatalf("second to return: waiter %d, err %v; want waiter 1 with a slot", second.id, second.err)
		}
		second.release()
	})
}

func TestLimiterQueueTimeout(t *testing.T) {
	tests := []struct {
		slots   int64
		timeout time.Duration
		detail  string
	}{
		{16, 5 * time.Second, "all 16 tool-call slots are busy; waited 5s"},
		{1, 250 * time.Millisecond, "all 1 tool-call slots are busy; waited 250ms"},
	}
	for _, tt := range tests {
		t.Run(tt.detail, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := NewLimiter(tt.slots, tt.timeout)
				var held []func()
				for range tt.slots {
					held = append(held, mustAcquire(t, l))
				}
				start := time.Now()
				release, err := l.Acquire(t.Context())
				if waited := time.Since(start); waited != tt.timeout {
					t.Errorf("Acquire waited %v, want %v", waited, tt.timeout)
				}
				if release != nil {
					t.Error("Acquire returned a release func with an error")
				}
				var p *problem.Problem
				if !errors.As(err, &p) {
					t.Fatalf("Acquire() = %v, want a *problem.Problem", err)
				}
				if p.Code != problem.ConcurrencyLimit {
					t.Errorf("Code = %s, want %s", p.Code, problem.ConcurrencyLimit)
				}
				if p.Detail != tt.detail {
					t.Errorf("Detail = %q, want %q", p.Detail, tt.detail)
				}
				if p.Status != 429 {
					t.Errorf("Status = %d, want 429", p.Status)
				}

				// The timed-out caller must have left the queue: one
				// release is enough for the next caller to get in at once.
				held[0]()
				held[0] = mustAcquire(t, l)
				if d := time.Since(start); d != tt.timeout {
					t.Errorf("re-acquire after release waited %v", d-tt.timeout)
				}
				for _, r := range held {
					r()
				}
			})
		})
	}
}

func TestLimiterContextCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1, time.Hour)
		release := mustAcquire(t, l)

		errPeer := errors.New("peer cancelled the call")
		ctx, cancel := context.WithCancelCause(t.Context())
		got := make(chan acquired, 1)
		startWaiter(ctx, l, 0, got)
		cancel(errPeer)
		a := <-got
		if a.err != errPeer {
			t.Errorf("Acquire() = %v, want the context's cause %v", a.err, errPeer)
		}
		if a.release != nil {
			t.Error("Acquire returned a release func with an error")
		}

		// The cancelled waiter must have left the queue without a slot.
		release()
		mustAcquire(t, l)()
	})
}

func TestLimiterContextDeadlineBeforeQueueTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1, time.Hour)
		release := mustAcquire(t, l)
		defer release()

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := l.Acquire(ctx)
		if err != context.DeadlineExceeded {
			t.Errorf("Acquire() = %v, want %v", err, context.DeadlineExceeded)
		}
	})
}

func TestLimiterContextAlreadyDone(t *testing.T) {
	l := NewLimiter(4, time.Hour)
	errGone := errors.New("session closed")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(errGone)
	// A free slot must not be handed to a caller that has already gone.
	release, err := l.Acquire(ctx)
	if err != errGone || release != nil {
		t.Fatalf("Acquire() = %v, %v; want nil, %v", release != nil, err, errGone)
	}
	for range 4 {
		mustAcquire(t, l)
	}
}

func TestLimiterReleaseFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(2, time.Second)
		a := mustAcquire(t, l)
		b := mustAcquire(t, l)
		a()
		c := mustAcquire(t, l)

		// Releasing twice must not create a third slot.
		b()
		b()
		d := mustAcquire(t, l)
		start := time.Now()
		if _, err := l.Acquire(t.Context()); err == nil {
			t.Fatal("Acquire() got a slot beyond the limit after a double release")
		}
		if time.Since(start) != time.Second {
			t.Errorf("over-limit Acquire returned after %v, want the queue timeout", time.Since(start))
		}
		c()
		d()
	})
}

func TestNewLimiterPanics(t *testing.T) {
	tests := []struct {
		name    string
		slots   int64
		timeout time.Duration
	}{
		{"zero slots", 0, time.Second},
		{"negative slots", -1, time.Second},
		{"zero timeout", 1, 0},
		{"negative timeout", 1, -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("NewLimiter(%d, %v) did not panic", tt.slots, tt.timeout)
				}
			}()
			NewLimiter(tt.slots, tt.timeout)
		})
	}
}

// TestLimiterArrivalOrder: the queue is in the order of Reserve, whatever
// order the waiting goroutines run in. Places are reserved 0..n-1 on one
// goroutine, as the session's read loop does; the waits start in reverse
// order; each release must admit the oldest reservation still waiting.
func TestLimiterArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const waiters = 6
		l := NewLimiter(1, time.Hour)
		held := mustAcquire(t, l)
		reservations := make([]*Reservation, waiters)
		for i := range reservations {
			reservations[i] = l.Reserve()
		}
		got := make(chan acquired, waiters)
		for id := waiters - 1; id >= 0; id-- {
			go func() {
				release, err := reservations[id].Wait(t.Context())
				got <- acquired{id: id, release: release, err: err}
			}()
			synctest.Wait()
		}
		noneReady(t, got)
		for want := range waiters {
			held()
			synctest.Wait()
			a := <-got
			if a.err != nil || a.id != want {
				t.Fatalf("slot went to reservation %d (err %v), want %d", a.id, a.err, want)
			}
			held = a.release
		}
		held()
	})
}

// TestLimiterQueueTimeoutFromReservation: the queue timeout counts from
// Reserve, not from Wait, and a cancelled reservation gives up its place
// (or the slot it was granted) without disturbing the order of the rest.
func TestLimiterQueueTimeoutFromReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1, time.Second)
		held := mustAcquire(t, l)
		late := l.Reserve()
		time.Sleep(time.Second)
		start := time.Now()
		_, err := late.Wait(t.Context())
		var prob *problem.Problem
		if !errors.As(err, &prob) || prob.Code != problem.ConcurrencyLimit || time.Since(start) != 0 {
			t.Fatalf("Wait a queue timeout after Reserve = %v after %v, want MCP_CONCURRENCY_LIMIT at once", err, time.Since(start))
		}

		gone, next := l.Reserve(), l.Reserve()
		gone.Cancel()
		held()
		release, err := next.Wait(t.Context())
		if err != nil {
			t.Fatalf("the reservation behind a cancelled one: %v", err)
		}
		// A reservation cancelled after it was granted hands the slot on.
		granted := l.Reserve()
		release()
		granted.Cancel()
		again, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatalf("after a granted reservation was cancelled: %v", err)
		}
		again()
	})
}
