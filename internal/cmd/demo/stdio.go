package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// responseTimeout bounds the wait for one response; the demo's slowest
// call, system_metrics, samples for half a second.
const responseTimeout = 30 * time.Second

// The stdio walkthrough's requests, as the client sends them.
const (
	initializeRequest  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}`
	initializedNotice  = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	toolsListRequest   = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	realQueryRequest   = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_only_sql","arguments":{"query":"SELECT c.full_name, count(o.order_id) AS orders, sum(t.total) AS spent FROM reporting.customers c LEFT JOIN reporting.order_totals t USING (customer_id) LEFT JOIN reporting.orders o USING (order_id) GROUP BY c.full_name ORDER BY spent DESC NULLS LAST","max_rows":3}}}`
	commitDropRequest  = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_only_sql","arguments":{"query":"COMMIT; DROP SCHEMA reporting CASCADE;"}}}`
	writableCTERequest = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_only_sql","arguments":{"query":"WITH d AS (DELETE FROM reporting.orders RETURNING *) SELECT count(*) FROM d"}}}`
	fileReadRequest    = `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"sandbox_fs_read","arguments":{"relative_path":"reports/2026-q3.md"}}}`
	traversalRequest   = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"sandbox_fs_read","arguments":{"relative_path":"../../../../etc/passwd"}}}`
	metricsRequest     = `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"system_metrics","arguments":{}}}`
)

// schemaTool is the tool that tells the model what it may query. It is
// called when bastion serve lists it, so that the demo runs against a
// server with or without it.
const schemaTool = "sql_schema"

// runStdio runs the stdio walkthrough against `server serve`.
func runStdio(w *walkthrough, server, logPath string) error {
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(server, "serve")
	cmd.Stderr = logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	s := &stdioSession{w: w, stdin: stdin, lines: make(chan []byte)}
	go s.read(stdout)

	w.printf("== bastion serve over stdio: the demo is the client, writing one request at a time\n")
	w.printf("   and waiting for its response (server log: %s)\n", logPath)
	err = s.walk()
	if stopErr := s.stop(cmd); err == nil {
		err = stopErr
	}
	return err
}

// walk is the walkthrough proper: every step the README promises.
func (s *stdioSession) walk() error {
	if _, err := s.call("the handshake: the client offers protocol 2025-11-25, the server agrees and says what it offers:", initializeRequest, answered); err != nil {
		return err
	}
	if err := s.notify("the client confirms the handshake:", initializedNotice); err != nil {
		return err
	}
	list, err := s.call(`the tools it offers, with their arguments ("?" marks an optional one):`, toolsListRequest, answered)
	if err != nil {
		return err
	}
	if req, ok := schemaRequest(list); ok {
		if _, err := s.call("the model discovers what it may query:", req, answered); err != nil {
			return err
		}
	}
	steps := []struct {
		label, request string
		want           outcome
	}{
		{"a real query against the sample dataset, at most 3 rows:", realQueryRequest, answered},
		{"a second statement smuggled in after COMMIT (COMMIT; DROP SCHEMA …) is refused:", commitDropRequest, refused},
		{"a writable CTE (a DELETE inside a SELECT) is refused:", writableCTERequest, refused},
		{"a file in the data directory is read:", fileReadRequest, answered},
		{"a path traversal out of the data directory is refused:", traversalRequest, refused},
		{"the host's metrics:", metricsRequest, answered},
	}
	for _, st := range steps {
		if _, err := s.call(st.label, st.request, st.want); err != nil {
			return err
		}
	}
	return nil
}

// schemaRequest returns the call of schemaTool when the tool list holds it
// and the demo can fill its required arguments. The sample dataset lives in
// one schema, which a "schema" argument names; any other required argument
// skips the step rather than fail it.
func schemaRequest(list []byte) (string, bool) {
	var resp struct {
		Result struct {
			Tools []struct {
				Name        string `json:"name"`
				InputSchema struct {
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				} `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(list, &resp) != nil {
		return "", false
	}
	for _, t := range resp.Result.Tools {
		if t.Name != schemaTool {
			continue
		}
		for _, name := range t.InputSchema.Required {
			if name != "schema" {
				return "", false
			}
		}
		args := map[string]string{}
		if _, ok := t.InputSchema.Properties["schema"]; ok {
			args["schema"] = "reporting"
		}
		params, _ := json.Marshal(map[string]any{"name": schemaTool, "arguments": args})
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":%s}`, params), true
	}
	return "", false
}

// stdioSession is the client's side of one bastion serve process.
type stdioSession struct {
	w     *walkthrough
	stdin io.WriteCloser
	// lines receives every line the server writes, and is closed at its
	// end of output; readErr then says why, when it was not EOF.
	lines   chan []byte
	readErr error
}

func (s *stdioSession) read(r io.Reader) {
	defer close(s.lines)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			s.lines <- line
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.readErr = err
			}
			return
		}
	}
}

func (s *stdioSession) write(body string) error {
	if _, err := io.WriteString(s.stdin, body+"\n"); err != nil {
		return fmt.Errorf("writing to bastion serve: %w", err)
	}
	return nil
}

// notify sends a notification, which has no response to wait for.
func (s *stdioSession) notify(label, body string) error {
	if err := s.write(body); err != nil {
		return err
	}
	s.w.step(label, summarizeRequest([]byte(body)), "", []byte(body), nil)
	return s.w.record(exchange{Label: label, Request: asJSON([]byte(body))})
}

// call sends one request, waits for the response with its id, prints the
// step and checks that the response is the outcome wanted.
func (s *stdioSession) call(label, body string, want outcome) ([]byte, error) {
	req, err := parseRequest(body)
	if err != nil {
		return nil, err
	}
	if err := s.write(body); err != nil {
		return nil, err
	}
	resp, err := s.await(req.ID)
	if err != nil {
		return nil, fmt.Errorf("step %q: %w", strings.TrimSuffix(label, ":"), err)
	}
	if err := s.w.record(exchange{Label: label, Request: asJSON([]byte(body)), Response: asJSON(resp)}); err != nil {
		return nil, err
	}
	text, got, err := describe(req.Method, resp)
	if err != nil {
		return nil, fmt.Errorf("step %q: %w", strings.TrimSuffix(label, ":"), err)
	}
	s.w.step(label, summarizeRequest([]byte(body)), text, []byte(body), resp)
	return resp, check(label, want, got)
}

// await returns the response whose id is id. Anything else the server
// sends meanwhile (a notification) goes to the transcript only.
func (s *stdioSession) await(id json.RawMessage) ([]byte, error) {
	timeout := time.After(responseTimeout)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				if s.readErr != nil {
					return nil, fmt.Errorf("reading bastion serve's output: %w", s.readErr)
				}
				return nil, errors.New("bastion serve ended its output before answering; see its log")
			}
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(line, &msg) == nil && bytes.Equal(msg.ID, id) {
				return line, nil
			}
			if err := s.w.record(exchange{Label: "(sent by the server unasked)", Response: asJSON(line)}); err != nil {
				return nil, err
			}
		case <-timeout:
			return nil, fmt.Errorf("no response within %s", responseTimeout)
		}
	}
}

// stop closes the server's stdin, its signal to drain and exit, and waits
// for it; a server that does not exit in time is killed.
func (s *stdioSession) stop(cmd *exec.Cmd) error {
	s.stdin.Close()
	killed := false
	timeout := time.After(10 * time.Second)
drain:
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				break drain
			}
			if err := s.w.record(exchange{Label: "(sent by the server unasked)", Response: asJSON(line)}); err != nil {
				return err
			}
		case <-timeout:
			// Only kill once; the output then ends with the process.
			if !killed {
				cmd.Process.Kill()
				killed = true
			}
		}
	}
	err := cmd.Wait()
	if killed {
		return errors.New("bastion serve did not exit after its stdin closed; killed")
	}
	if err != nil {
		return fmt.Errorf("bastion serve: %w", err)
	}
	return nil
}
