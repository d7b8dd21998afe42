package e2e

import (
	"fmt"
	"strings"
	"sync"
)

// suiteLeaks watches, across the whole suite, everything a gateway wrote
// (its log and its audit on stderr, and the metrics the tests scraped)
// for every token, argument value and header value the tests declared
// secret. TestMain checks it once every test has run, so a leak anywhere
// in the suite — not only in the test that set the secret — fails it.
var suiteLeaks = &leakWatch{}

type leakWatch struct {
	mu      sync.Mutex
	secrets map[string]bool
	outputs []func() string
}

// secret declares values that must never be written.
func (l *leakWatch) secret(values ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.secrets == nil {
		l.secrets = map[string]bool{}
	}
	for _, v := range values {
		l.secrets[v] = true
	}
}

// watch adds an output to check.
func (l *leakWatch) watch(out func() string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outputs = append(l.outputs, out)
}

// check returns one line per secret found in an output.
func (l *leakWatch) check() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var found []string
	for i, out := range l.outputs {
		text := out()
		for s := range l.secrets {
			if strings.Contains(text, s) {
				found = append(found, fmt.Sprintf("output %d of %d holds the secret %q", i+1, len(l.outputs), s))
			}
		}
	}
	return found
}
