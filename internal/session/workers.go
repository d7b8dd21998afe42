package session

import (
	"sync"
	"time"
)

// workerIdle is how long an idle worker waits for the next task before it
// exits. Under load workers never idle that long; when load stops, the
// pool shrinks back to nothing soon after.
const workerIdle = 2 * time.Second

// workers runs tasks on goroutines that outlive a single task. A fresh
// goroutine starts with a small stack that a tools/call outgrows (JSON
// decoding, schema validation), so each call on a new goroutine paid for
// copying its stack, twice; a worker grows once and then serves call after
// call. It is an optimisation only: when no worker is idle, a task gets a
// new one at once, so tasks never queue here (the limiter is the only
// queue, and it is FIFO).
//
// Every worker is owned by the pool and waited for by stop.
type workers struct {
	tasks chan func() // unbuffered: a send succeeds only if a worker is idle
	quit  chan struct{}
	wg    sync.WaitGroup
}

func newWorkers() *workers {
	return &workers{tasks: make(chan func()), quit: make(chan struct{})}
}

// run runs f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		w.wg.Add(1)
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	defer w.wg.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-w.tasks:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop makes idle workers exit and waits for every worker. Call it only
// after the last run: workers still running a task finish it first.
func (w *workers) stop() {
	close(w.quit)
	w.wg.Wait()
}
