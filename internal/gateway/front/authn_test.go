package front

import (
	"testing"
	"time"
)

// TestAuthFailureHold: a token held for a request whose authentication is
// not decided yet counts for every other request of the address, a
// success gives it back, and a failure spends it.
func TestAuthFailureHold(t *testing.T) {
	l := newLimiters(time.Minute, 2)
	a, blocked, _ := l.reserve("addr")
	if blocked {
		t.Fatal("the first reservation is blocked")
	}
	b, blocked, _ := l.reserve("addr")
	if blocked {
		t.Fatal("the second reservation is blocked")
	}
	if _, blocked, wait := l.reserve("addr"); !blocked || wait <= 0 {
		t.Fatalf("a third reservation while two are held: blocked %v, wait %s", blocked, wait)
	}
	if _, blocked, _ := l.reserve("other"); blocked {
		t.Fatal("another address is blocked")
	}
	// Successes give their tokens back, as many times as they come.
	a(false)
	for i := range 10 {
		c, blocked, _ := l.reserve("addr")
		if blocked {
			t.Fatalf("success %d: blocked", i)
		}
		c(false)
	}
	b(true)
	c, blocked, _ := l.reserve("addr")
	if blocked {
		t.Fatal("one failure of two blocks")
	}
	c(true)
	if _, blocked, wait := l.reserve("addr"); !blocked || wait <= 0 || wait > time.Minute {
		t.Fatalf("after two failures: blocked %v, wait %s", blocked, wait)
	}
	var none *limiters
	settle, blocked, _ := none.reserve("addr")
	if blocked {
		t.Fatal("no limiter blocks")
	}
	settle(true)
}
