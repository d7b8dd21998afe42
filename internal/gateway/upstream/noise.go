package upstream

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// noise bounds the warnings one downstream can make the gateway log
// about what it sends (lines that are not JSON-RPC, messages over the
// cap), as relayStderr bounds its stderr: past stderrBurst in a window of
// stderrWindow they are counted instead, and the count is logged when
// the next window opens. Each is still counted in Stats.
type noise struct {
	mu      sync.Mutex
	start   time.Time
	n       int
	dropped int
}

func (l *noise) warn(log *slog.Logger, msg string, attrs ...slog.Attr) {
	l.mu.Lock()
	now := time.Now()
	dropped := 0
	if now.Sub(l.start) > stderrWindow {
		dropped = l.dropped
		l.start, l.n, l.dropped = now, 0, 0
	}
	l.n++
	ok := l.n <= stderrBurst
	if !ok {
		l.dropped++
	}
	l.mu.Unlock()
	if dropped > 0 {
		log.Warn("downstream warnings dropped", slog.Int("warnings", dropped))
	}
	if ok {
		log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
	}
}
