package guard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// errQueueTimeout is the cancel cause of the queue-wait context, so that a
// queue timeout is never mistaken for the caller's own deadline.
var errQueueTimeout = errors.New("guard: queue timeout")

// Limiter bounds how many tool calls run at once. Callers that find every
// slot busy wait in a FIFO queue for at most the queue timeout, so a burst
// is smoothed but never grows an unbounded backlog.
//
// A Limiter is safe for concurrent use and starts no goroutines.
type Limiter struct {
	sem          *semaphore.Weighted
	slots        int64
	queueTimeout time.Duration
}

// NewLimiter returns a limiter with slots tool-call slots and a queue
// timeout of queueTimeout. It panics if slots < 1 or queueTimeout <= 0:
// configuration is validated before a limiter is built, so either is a
// programming error.
func NewLimiter(slots int64, queueTimeout time.Duration) *Limiter {
	if slots < 1 {
		panic(fmt.Sprintf("guard: NewLimiter: slots must be at least 1, got %d", slots))
	}
	if queueTimeout <= 0 {
		panic(fmt.Sprintf("guard: NewLimiter: queue timeout must be positive, got %v", queueTimeout))
	}
	return &Limiter{sem: semaphore.NewWeighted(slots), slots: slots, queueTimeout: queueTimeout}
}

// Acquire waits, first come first served, for a slot for at most the queue
// timeout.
//
// On success it returns release, which gives the slot back; call it exactly
// once when the call ends (later calls do nothing). If no slot frees up in
// time, Acquire returns a [*problem.Problem] with code
// [problem.ConcurrencyLimit]. If ctx ends first, whether before or during
// the wait, Acquire returns [context.Cause] of ctx and holds no slot.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	// TryAcquire fails whenever anyone is queued, so the fast path cannot
	// overtake a waiter; it spares uncontended calls a timer.
	if !l.sem.TryAcquire(1) {
		qctx, cancel := context.WithTimeoutCause(ctx, l.queueTimeout, errQueueTimeout)
		err := l.sem.Acquire(qctx, 1)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, problem.Newf(problem.ConcurrencyLimit, nil,
				"all %d tool-call slots are busy; waited %v", l.slots, l.queueTimeout).
				WithCause(errQueueTimeout)
		}
	}
	var released atomic.Bool
	return func() {
		// A second release would hand out a slot that does not exist.
		if released.CompareAndSwap(false, true) {
			l.sem.Release(1)
		}
	}, nil
}
