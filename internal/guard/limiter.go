package guard

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// errQueueTimeout is the cause of a queue timeout, so that it is never
// mistaken for the caller's own deadline.
var errQueueTimeout = errors.New("guard: queue timeout")

// Limiter bounds how many tool calls run at once. Callers that find every
// slot busy wait in a FIFO queue for at most the queue timeout, so a burst
// is smoothed but never grows an unbounded backlog.
//
// The queue is ordered by [Limiter.Reserve], which never blocks: the
// session's read loop reserves a place for each call as it reads it, and
// the call's task then waits on that reservation. Order is therefore the
// order in which calls arrived, not the order in which their goroutines
// happened to be scheduled. That is why this is not
// golang.org/x/sync/semaphore, whose Acquire takes its place in the queue
// only once the waiting goroutine runs.
//
// A Limiter is safe for concurrent use and starts no goroutines.
type Limiter struct {
	slots        int64
	queueTimeout time.Duration

	mu      sync.Mutex
	free    int64
	waiting list.List // of *Reservation, oldest first
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
	return &Limiter{slots: slots, queueTimeout: queueTimeout, free: slots}
}

// Reservation is a place in a [Limiter]'s queue, or a slot already held.
// Exactly one of [Reservation.Wait] and [Reservation.Cancel] must be called
// on it, once.
type Reservation struct {
	l     *Limiter
	since time.Time     // when the place was taken; the queue timeout counts from here
	ready chan struct{} // closed when the slot is granted
	elem  *list.Element // the place in l.waiting; nil once granted or gone
}

// Reserve takes the next place in the queue, or a free slot when no one
// is waiting, without blocking. The queue timeout starts now.
func (l *Limiter) Reserve() *Reservation {
	r := &Reservation{l: l, since: time.Now(), ready: make(chan struct{})}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.free > 0 && l.waiting.Len() == 0 {
		l.free--
		close(r.ready)
	} else {
		r.elem = l.waiting.PushBack(r)
	}
	return r
}

// Acquire reserves a place and waits for it: [Limiter.Reserve] followed
// by [Reservation.Wait], for callers that arrive one at a time.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	return l.Reserve().Wait(ctx)
}

// Wait waits for the reserved slot until the queue timeout, counted from
// the reservation, has passed.
//
// On success it returns release, which gives the slot back; call it exactly
// once when the call ends (later calls do nothing). If no slot frees up in
// time, Wait returns a [*problem.Problem] with code
// [problem.ConcurrencyLimit]. If ctx ends first, whether before or during
// the wait, Wait returns [context.Cause] of ctx and holds no slot.
func (r *Reservation) Wait(ctx context.Context) (release func(), err error) {
	l := r.l
	if ctx.Err() != nil {
		r.Cancel()
		return nil, context.Cause(ctx)
	}
	select {
	case <-r.ready:
		return r.releaser(), nil
	default:
	}
	timer := time.NewTimer(l.queueTimeout - time.Since(r.since))
	defer timer.Stop()
	select {
	case <-r.ready:
		return r.releaser(), nil
	case <-ctx.Done():
		err = context.Cause(ctx)
	case <-timer.C:
		err = problem.Newf(problem.ConcurrencyLimit, nil,
			"all %d tool-call slots are busy; waited %v", l.slots, l.queueTimeout).
			WithCause(errQueueTimeout)
	}
	if !r.leave() {
		// Granted while giving up: the slot goes to the next in line.
		l.release()
	}
	return nil, err
}

// Cancel gives up the reservation: its place, or the slot it was granted.
func (r *Reservation) Cancel() {
	if !r.leave() {
		r.l.release()
	}
}

// leave removes a reservation still waiting from the queue and reports
// whether it was still waiting; false means a slot was granted to it.
func (r *Reservation) leave() bool {
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.elem == nil {
		return false
	}
	l.waiting.Remove(r.elem)
	r.elem = nil
	return true
}

// releaser returns the release func of a granted slot.
func (r *Reservation) releaser() func() {
	var once sync.Once
	// A second release would hand out a slot that does not exist.
	return func() { once.Do(r.l.release) }
}

// release gives a slot to the oldest waiter, or back to the pool.
func (l *Limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if front := l.waiting.Front(); front != nil {
		next := l.waiting.Remove(front).(*Reservation)
		next.elem = nil
		close(next.ready)
		return
	}
	l.free++
}
