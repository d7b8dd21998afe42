package gateway

import (
	"context"
	"sync"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
)

// slots are one downstream's bound on requests in flight
// (limits.inflight_per_downstream, decision 14), shared fairly: no one
// principal holds more than a quarter of them (at least one), so that a
// caller looping a slow tool it may call cannot make every other caller
// wait for the server. A principal past its share waits for one of its
// own slots. The gateway's own principals — anonymous under auth mode
// none, the --stdio client — are every caller there is, and have no
// share: they may take every slot.
type slots struct {
	all chan struct{}
	per int

	mu     sync.Mutex
	shares map[string]*share // principal → its share, while it holds or waits for a slot
}

type share struct {
	ch   chan struct{}
	refs int
}

func newSlots(n int) *slots {
	return &slots{all: make(chan struct{}, n), per: max(1, n/4), shares: map[string]*share{}}
}

// acquire waits, within ctx, for a slot for p; release gives it back.
// The error is ctx's cause.
func (s *slots) acquire(ctx context.Context, p auth.Principal) (release func(), err error) {
	var sh *share
	if p.Issuer != "none" && p.Issuer != "stdio" && p.Issuer != "" {
		who := principalKey(p)
		s.mu.Lock()
		if sh = s.shares[who]; sh == nil {
			sh = &share{ch: make(chan struct{}, s.per)}
			s.shares[who] = sh
		}
		sh.refs++
		s.mu.Unlock()
		drop := func() {
			s.mu.Lock()
			if sh.refs--; sh.refs == 0 {
				delete(s.shares, who)
			}
			s.mu.Unlock()
		}
		select {
		case sh.ch <- struct{}{}:
		case <-ctx.Done():
			drop()
			return nil, context.Cause(ctx)
		}
		release = func() { <-sh.ch; drop() }
	}
	select {
	case s.all <- struct{}{}:
	case <-ctx.Done():
		if release != nil {
			release()
		}
		return nil, context.Cause(ctx)
	}
	own := release
	return func() {
		<-s.all
		if own != nil {
			own()
		}
	}, nil
}
