// Command demo is the driver of `make demo` (scripts/demo.sh): it plays the
// client in a scripted walkthrough and prints each exchange as a labelled
// step, the request summarised on one line and the response right after it,
// described rather than dumped: a tool list as one line per tool and its
// arguments, rows as a table, a refusal as its problem code and detail.
//
//	demo stdio   [--server bin/bastion] [--log bin/demo.log]
//	demo gateway --url http://127.0.0.1:PORT [--audit bin/demo-audit.jsonl]
//
// stdio starts `bastion serve` as its child (with this process's
// environment: MCP_SQL_DSN, MCP_SAFE_DATA_DIR, …) and talks to it over
// stdin and stdout. gateway waits for a running `bastion gateway` to be
// ready and calls it over Streamable HTTP as alice and bob, whose tokens it
// finds in MCP_GATEWAY_TOKENS, then prints the gateway's decision log.
//
// Nothing is hidden: every request and response, as sent, is appended to
// the transcript (--transcript, default bin/demo-transcript.jsonl), and
// --raw prints them under each step too. A step whose response is not the
// one expected (a query that fails, a bypass that is not refused) makes the
// command exit 1, so that the demo is also a smoke test. It is a
// development aid, never shipped.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: demo stdio [--server PATH] [--log FILE] [--transcript FILE] [--raw]
       demo gateway --url URL [--audit FILE] [--transcript FILE] [--raw]`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "stdio" && args[0] != "gateway") {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	mode := args[0]
	fs := flag.NewFlagSet("demo "+mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	raw := fs.Bool("raw", false, "also print every request and response as sent")
	transcript := fs.String("transcript", "bin/demo-transcript.jsonl", "append every request and response, as sent, to `FILE`")
	server := fs.String("server", "bin/bastion", "stdio: the bastion binary to run as `bastion serve`")
	logPath := fs.String("log", "bin/demo.log", "stdio: the `FILE` that receives bastion serve's stderr")
	url := fs.String("url", "", "gateway: the gateway's base `URL` (its MCP endpoint is URL/mcp)")
	audit := fs.String("audit", "bin/demo-audit.jsonl", "gateway: the gateway's decision log `FILE`")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if mode == "gateway" && *url == "" {
		fmt.Fprintln(stderr, "demo gateway: --url is required")
		return 2
	}

	f, err := os.OpenFile(*transcript, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	// The transcript keeps what was sent, "<" and all.
	enc.SetEscapeHTML(false)
	w := &walkthrough{out: stdout, raw: *raw, transcript: enc, part: mode}

	if mode == "stdio" {
		err = runStdio(w, *server, *logPath)
	} else {
		err = runGateway(w, strings.TrimSuffix(*url, "/"), *audit)
	}
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	return 0
}

// walkthrough prints labelled steps and records each exchange in the
// transcript.
type walkthrough struct {
	out        io.Writer
	raw        bool
	transcript *json.Encoder
	part       string // "stdio" or "gateway", recorded with each exchange
}

// exchange is one transcript line: a request and its response, as sent.
type exchange struct {
	Part     string            `json:"part"`
	Label    string            `json:"label,omitempty"`
	As       string            `json:"as,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Request  any               `json:"request,omitempty"`
	Status   int               `json:"http_status,omitempty"`
	Response any               `json:"response,omitempty"`
}

// asJSON keeps valid JSON as it was sent and anything else as a string, so
// that a malformed response still reaches the transcript.
func asJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
}

func (w *walkthrough) record(e exchange) error {
	e.Part = w.part
	if err := w.transcript.Encode(e); err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	return nil
}

func (w *walkthrough) printf(format string, args ...any) {
	fmt.Fprintf(w.out, format, args...)
}

// step prints one labelled exchange: the label, "->" and the request's
// summary, "<-" and the response described (its first line prefixed, the
// others indented under it), and with --raw both as sent.
func (w *walkthrough) step(label, request, response string, rawRequest, rawResponse []byte) {
	w.printf("\n%s\n  -> %s\n", label, request)
	if response != "" {
		lines := strings.Split(response, "\n")
		w.printf("  <- %s\n", lines[0])
		for _, l := range lines[1:] {
			w.printf("     %s\n", l)
		}
	}
	if w.raw {
		w.printf("     raw ->  %s\n", compact(rawRequest))
		if rawResponse != nil {
			w.printf("     raw <-  %s\n", compact(rawResponse))
		}
	}
}

// check compares what a step got with what it must get.
func check(label string, want, got outcome) error {
	if want != got {
		return fmt.Errorf("step %q: want the request %s, but it was %s", strings.TrimSuffix(label, ":"), want, got)
	}
	return nil
}

// request is the part of a JSON-RPC request the drivers read.
type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

func parseRequest(body string) (request, error) {
	var r request
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return r, fmt.Errorf("a request of the demo's own is not JSON: %w", err)
	}
	if r.Method == "" {
		return r, errors.New("a request of the demo's own has no method")
	}
	return r, nil
}
