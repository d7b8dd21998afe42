package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// TestInvalidCallsUnderFullPendingCap: with one slot and the pending cap
// full, a call that is invalid on its own gets its own error through the
// real binary — a missing name, an unknown tool, an argument name the
// sanitizer refuses — and only a valid call is refused for capacity.
func TestInvalidCallsUnderFullPendingCap(t *testing.T) {
	t.Parallel()
	p := serve(t, "MCP_MAX_CONCURRENCY=1", "MCP_QUEUE_TIMEOUT_MS=60000")
	p.initialize("2025-11-25")
	// The pending cap is 8 × MCP_MAX_CONCURRENCY: one metrics call runs
	// (it samples the CPU for 500 ms), seven wait.
	for id := 1; id <= 8; id++ {
		p.call(id, "system_metrics", map[string]any{})
	}
	cases := []struct {
		params string
		want   string
	}{
		{`{"arguments":{}}`, "-32602"},
		{`{"name":"nosuch","arguments":{}}`, "-32602"},
		{`{"name":"system_metrics","arguments":{"bad-name":1}}`, "sanitizer"},
		{`{"name":"system_metrics","arguments":{}}`, "MCP_CONCURRENCY_LIMIT"},
	}
	for i, c := range cases {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, 100+i, c.params))
	}
	got := p.recvN(len(cases)) // answered at once, before any of the eight
	for i, c := range cases {
		m := got[fmt.Sprint(100+i)]
		raw, _ := json.Marshal(m)
		switch c.want {
		case "sanitizer":
			if r, ok := m["result"].(map[string]any); !ok || r["isError"] != true || !strings.Contains(string(raw), "MCP_VALIDATION_ERROR") {
				t.Errorf("%s under a full cap: %s, want the sanitizer's own problem", c.params, raw)
			}
		case "MCP_CONCURRENCY_LIMIT":
			if !strings.Contains(string(raw), "MCP_CONCURRENCY_LIMIT") {
				t.Errorf("%s under a full cap: %s, want a capacity refusal", c.params, raw)
			}
		default:
			if fmt.Sprint(errCode(t, m)) != c.want {
				t.Errorf("%s under a full cap: %s, want error %s", c.params, raw, c.want)
			}
		}
	}
	for range 8 {
		if m := p.recv(); m["error"] != nil {
			t.Errorf("a call that held its place: %v", m)
		}
	}
}

// TestCallsStartInArrivalOrder: with one slot, calls get it in the order
// the server read them. The server logs each call as it gets its slot
// (at debug level); with one slot, the order of those lines is the order
// of the slot. Eight calls, the pending cap of one slot, sent at once;
// repeated, so that a scheduling race would show.
func TestCallsStartInArrivalOrder(t *testing.T) {
	t.Parallel()
	const calls, rounds = 8, 25
	data, err := filepath.Abs("../testdata/demo-data")
	if err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		p := serve(t, "MCP_MAX_CONCURRENCY=1", "MCP_QUEUE_TIMEOUT_MS=60000", "MCP_LOG_LEVEL=debug", "MCP_SAFE_DATA_DIR="+data)
		p.initialize("2025-11-25")
		var b strings.Builder
		for id := 1; id <= calls; id++ {
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sandbox_fs_read","arguments":{"relative_path":"reports/2026-q3.md"}}}`+"\n", id)
		}
		p.send(strings.TrimSuffix(b.String(), "\n"))
		for id, m := range p.recvN(calls) {
			if r, ok := m["result"].(map[string]any); !ok || r["isError"] != false {
				t.Fatalf("round %d: call %s: %v", round, id, m)
			}
		}
		// Once the server has exited, its stderr is all there.
		p.closeStdin()
		p.expectEOF()
		if code := p.wait(); code != 0 {
			t.Fatalf("round %d: exit %d", round, code)
		}
		var order []int
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			var l struct {
				Msg string `json:"msg"`
				ID  string `json:"id"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "tools/call started" {
				var id int
				fmt.Sscan(l.ID, &id)
				order = append(order, id)
			}
		}
		want := make([]int, calls)
		for i := range want {
			want[i] = i + 1
		}
		if !slices.Equal(order, want) {
			t.Fatalf("round %d: calls got the slot in the order %v, want the order they arrived in", round, order)
		}
	}
}

// TestCheckNamesDatabaseFailureClass: `bastion serve --check` connects to
// the database and fails, naming the class of the failure and nothing of
// the DSN, for each class; with a usable database it passes.
func TestCheckNamesDatabaseFailureClass(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	c := db.Cluster
	// A role that may not connect to a database that revoked CONNECT
	// from PUBLIC. Roles are cluster-wide: the name is this test's own.
	noConnDB := pgtest.NewDB(t)
	noConnDB.Exec(t, "REVOKE CONNECT ON DATABASE "+noConnDB.Name+" FROM PUBLIC")
	if err := c.Exec(t.Context(), "", "CREATE ROLE e2e_check_noconn LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Exec(ctx, "", "DROP ROLE e2e_check_noconn"); err != nil {
			t.Error(err)
		}
	})
	// A server that accepts and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	const secret = "sekret-Pa55word"
	sock := c.Dir()
	cases := []struct {
		class, dsn string
		private    []string // must not appear in the output
	}{
		{"refused", "host=127.0.0.1 port=1 user=reader_x dbname=db_x sslmode=disable", []string{"reader_x", "db_x"}},
		{"unknown host", "host=db-x.invalid user=reader_x dbname=db_x sslmode=disable", []string{"db-x.invalid", "reader_x"}},
		{"no socket", fmt.Sprintf("host=%s port=1 user=reader_x dbname=db_x", filepath.Join(sock, "nosuch")), []string{sock, "reader_x"}},
		{"timeout", fmt.Sprintf("host=127.0.0.1 port=%d user=reader_x dbname=db_x sslmode=disable connect_timeout=1", ln.Addr().(*net.TCPAddr).Port), []string{"reader_x", "db_x"}},
		{"tls", fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=require", c.Port(), c.User(), db.Name), []string{db.Name}},
		{"authentication", fmt.Sprintf("host=%s port=%d user=nobody_x dbname=%s", sock, c.Port(), db.Name), []string{"nobody_x", sock, db.Name}},
		{"no such database", fmt.Sprintf("host=%s port=%d user=%s dbname=nosuch_db_x", sock, c.Port(), c.User()), []string{"nosuch_db_x", sock}},
		{"no privilege", fmt.Sprintf("host=%s port=%d user=e2e_check_noconn dbname=%s", sock, c.Port(), noConnDB.Name), []string{"e2e_check_noconn", noConnDB.Name}},
	}
	for _, tc := range cases {
		out, errOut, code := runBastion(t, baseEnv("MCP_SQL_DSN="+tc.dsn+" password="+secret), "serve", "--check")
		all := out + errOut
		if code != 1 || !strings.Contains(errOut, "the database cannot be used ("+tc.class+")") {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 naming the class", tc.class, code, errOut)
		}
		for _, s := range append(tc.private, secret) {
			if strings.Contains(all, s) {
				t.Errorf("%s: the output names %q: %q", tc.class, s, all)
			}
		}
	}
	if _, errOut, code := runBastion(t, baseEnv("MCP_SQL_DSN="+db.DSN()), "serve", "--check"); code != 0 {
		t.Errorf("--check with a usable database: exit %d: %s", code, errOut)
	}
	// serve starts anyway, and its log, at the default level, names the
	// class in one line and nothing of the DSN; so does the line of a
	// call that needed the database.
	for _, tc := range cases {
		p := serve(t, "MCP_SQL_DSN="+tc.dsn+" password="+secret)
		p.initialize("2025-11-25")
		p.call(1, "read_only_sql", map[string]any{"query": "SELECT 1"})
		p.recv()
		p.closeStdin()
		code := p.wait()
		logs := p.stderr.String()
		if code != 0 || !strings.Contains(logs, `"level":"INFO","msg":"database failure","tool":"read_only_sql","step":"connect","class":"`+tc.class+`"`) ||
			!strings.Contains(logs, `"msg":"the database cannot be used yet; calls fail until it can","tool":"read_only_sql","class":"`+tc.class+`"`) {
			t.Errorf("serve, %s: exit %d, stderr %q; want a clean start whose log names the class at info", tc.class, code, logs)
		}
		if !strings.Contains(logs, `"msg":"tools/call","tool":"read_only_sql","id":"1","outcome":"`) {
			t.Errorf("serve, %s: no log line for the call: %s", tc.class, logs)
		}
		for _, s := range append(tc.private, secret) {
			if strings.Contains(logs, s) {
				t.Errorf("serve, %s: the log names %q: %q", tc.class, s, logs)
			}
		}
	}
}
