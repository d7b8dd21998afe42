package session_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/mcp"
	"github.com/mcp-bastion/bastion/internal/session"
	"github.com/mcp-bastion/bastion/internal/tool"
	"github.com/mcp-bastion/bastion/internal/wire"
)

type bigOut struct {
	Text string `json:"text"`
}

// TestCancelReadBehindWaitingAnswer: a large answer waits for an empty
// output queue (the client is not reading), the client sends a ping and
// then cancels the call. The reader answers the ping inline; that answer
// must not wait behind the large one, or the reader would stop reading
// and only see the cancellation once the large answer was queued — and
// the cancelled call's answer would be sent after all.
func TestCancelReadBehindWaitingAnswer(t *testing.T) {
	const maxFrame = 1024 // the output queue holds 16 KiB
	started := make(chan struct{}, 1)
	big := tool.MustNew(tool.Descriptor{
		Name:        "big",
		InputSchema: jsontext.Value(`{"type":"object","additionalProperties":false}`),
		Annotations: tool.ReadOnly,
	}, func(ctx context.Context, _ struct{}) (bigOut, error) {
		started <- struct{}{}
		return bigOut{Text: strings.Repeat("a", 20<<10)}, nil
	})
	reg, err := tool.NewRegistry(big)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	srv, err := session.NewServer(session.Options{Tools: reg, Info: mcp.Implementation{Name: "t", Version: "1"},
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	// An OS pipe for input: the test's writes never wait for the reader,
	// whatever the session does.
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := srv.NewSession(wire.NewConn(inR, outW, maxFrame)).Run(context.Background())
		outW.Close()
		done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("session did not end")
		}
	})
	out := bufio.NewReader(outR)
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if _, err := out.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// From here the test reads nothing until the end: this answer stays
	// in the output, and the large one waits for it to be written.
	send(`{"jsonrpc":"2.0","id":"p0","method":"ping"}`)
	send(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"big","arguments":{}}}`)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not start")
	}
	time.Sleep(100 * time.Millisecond) // its answer reaches the queue and waits
	send(`{"jsonrpc":"2.0","id":"p2","method":"ping"}`)
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"big"}}`)
	// The withdrawn answer is logged as not written; reading before that
	// would let it go. A reader stuck behind it never gets that far.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "response not written") && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	send(`{"jsonrpc":"2.0","id":"p3","method":"ping"}`)

	var ids []string
	for {
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read: %v (read %v)", err, ids)
		}
		var m struct {
			ID any `json:"id"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		id, _ := m.ID.(string)
		ids = append(ids, id)
		if id == "p3" {
			break
		}
	}
	for _, id := range ids {
		if id == "big" {
			t.Fatalf("answers %v: the cancelled call was answered", ids)
		}
	}
}
