package sqlquery

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// wantProblem asserts that err is a problem with the given code and
// detail, naming the query argument.
func wantProblem(tb testing.TB, err error, code problem.Code, detail string) *problem.Problem {
	tb.Helper()
	if err == nil {
		tb.Fatalf("accepted, want %s %q", code, detail)
	}
	prob := asProblem(tb, err)
	if prob.Code != code || prob.Detail != detail {
		tb.Fatalf("got %s %q, want %s %q", prob.Code, prob.Detail, code, detail)
	}
	if len(prob.InvalidParams) != 1 || prob.InvalidParams[0] != "query" {
		tb.Fatalf("invalid_params = %v, want [query]", prob.InvalidParams)
	}
	return prob
}

func TestPrepareInputChecks(t *testing.T) {
	p := newTestPolicy(t)
	tests := []struct {
		name   string
		query  string
		detail string
	}{
		{"empty", "", "query is empty"},
		{"blank", " \t\r\n", "query is empty"},
		{"NUL", "SELECT 1\x00; DROP TABLE t", "query contains a NUL byte"},
		{"invalid UTF-8", "SELECT '\xff'", "query is not valid UTF-8"},
		{"too long", "SELECT 1" + strings.Repeat(" ", DefaultMaxQueryBytes), "query is 65544 bytes long; the limit is 65536"},
		{"no statement", ";", "query contains no statement"},
		{"comment only", "-- nothing", "query contains no statement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Prepare(tt.query, 10)
			wantProblem(t, err, problem.Validation, tt.detail)
		})
	}
}

func TestPrepareMaxQueryBytes(t *testing.T) {
	p := newTestPolicy(t, WithMaxQueryBytes(16))
	if _, err := p.Prepare("SELECT 123456789", 10); err != nil {
		t.Fatalf("16-byte query refused: %v", err)
	}
	_, err := p.Prepare("SELECT 1234567890", 10)
	wantProblem(t, err, problem.Validation, "query is 17 bytes long; the limit is 16")
}

func TestPrepareSyntaxError(t *testing.T) {
	p := newTestPolicy(t)
	_, err := p.Prepare("SELECT * FROM t WHERE", 10)
	prob := wantProblem(t, err, problem.Validation, `query is not valid SQL: "syntax error at end of input"`)
	if pos, ok := prob.Metadata["position"].(int); !ok || pos != 22 {
		t.Errorf("metadata position = %v, want 22", prob.Metadata["position"])
	}
	if prob.Cause == nil {
		t.Error("syntax problem has no cause for the log")
	}
}

// TestPrepareSyntaxErrorEchoIsCapped feeds an error whose message quotes
// the rest of the query: the detail must stay bounded and escaped.
func TestPrepareSyntaxErrorEchoIsCapped(t *testing.T) {
	p := newTestPolicy(t)
	query := "SELECT '" + strings.Repeat("x\n", 2000)
	_, err := p.Prepare(query, 10)
	prob := asProblem(t, err)
	if prob.Code != problem.Validation {
		t.Fatalf("code = %s, want %s", prob.Code, problem.Validation)
	}
	if len(prob.Detail) > 2*problem.MaxEcho+64 {
		t.Errorf("detail is %d bytes long, want it capped near %d", len(prob.Detail), problem.MaxEcho)
	}
	if strings.ContainsAny(prob.Detail, "\n\r") {
		t.Errorf("detail %q holds raw control characters", prob.Detail)
	}
}

func TestPrepareErrorsAreProblems(t *testing.T) {
	p := newTestPolicy(t)
	for _, q := range []string{"DELETE FROM t", "SELEC", "SELECT pg_sleep(1)", ""} {
		_, err := p.Prepare(q, 10)
		prob := asProblem(t, err)
		if prob.Type == "" || prob.Title == "" || prob.Status == 0 {
			t.Errorf("Prepare(%q) problem %+v lacks type, title or status", q, prob)
		}
	}
}

func TestNewPolicyOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
		err  string
	}{
		{"query bytes zero", WithMaxQueryBytes(0), "sqlquery: max query bytes 0 is outside [1, 1048576]"},
		{"query bytes too large", WithMaxQueryBytes(MaxQueryBytesCeiling + 1), "sqlquery: max query bytes 1048577 is outside [1, 1048576]"},
		{"empty denied name", WithDeniedFunctions(""), `sqlquery: denied function "" is not a valid name`},
		{"long denied name", WithDeniedFunctions(strings.Repeat("x", 64)), `sqlquery: denied function "` + strings.Repeat("x", 64) + `" is not a valid name`},
		{"empty allowed name", WithAllowedFunctions(""), `sqlquery: allowed function "" is not a valid name`},
		{"pattern as allowed name", WithAllowedFunctions("pg_*"), `sqlquery: allowed function "pg_*" is not a valid name`},
		{"allowing a denied function", WithAllowedFunctions("lower", "pg_sleep"), `sqlquery: allowed function "pg_sleep" is denied by the rule "pg_sleep*"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.opt)
			if err == nil || err.Error() != tt.err {
				t.Fatalf("NewPolicy() = %v, %v; want error %q", p, err, tt.err)
			}
		})
	}
}

func TestWithDeniedFunctions(t *testing.T) {
	p := newTestPolicy(t, WithDeniedFunctions("audit_*", "Secret"))
	for q, detail := range map[string]string{
		"SELECT audit_write('x')":          "function audit_write is not allowed",
		"SELECT app.audit_log()":           "function app.audit_log is not allowed",
		`SELECT "Secret"()`:                `function "Secret" is not allowed`,
		"SELECT pg_sleep(1)":               "function pg_sleep is not allowed",
		`SELECT "we""ird"."Secret"(1, 2)`:  `function "we\"ird"."Secret" is not allowed`,
		"SELECT * FROM audit_rows() AS r":  "function audit_rows is not allowed",
		"SELECT 1 FROM t WHERE audit_x(1)": "function audit_x is not allowed",
	} {
		_, err := p.Prepare(q, 10)
		wantProblem(t, err, problem.QueryViolation, detail)
	}
	// Unquoted Secret folds to secret, a different name.
	if _, err := p.Prepare("SELECT Secret()", 10); err != nil {
		t.Errorf("SELECT Secret() refused: %v", err)
	}
}

func TestWithAllowedFunctions(t *testing.T) {
	p := newTestPolicy(t, WithAllowedFunctions("count", "lower", "extract", "now", "bernoulli"))
	for _, q := range []string{
		"SELECT count(*), lower(name) FROM customers",
		"SELECT EXTRACT(year FROM now())",
		"SELECT 1 FROM customers TABLESAMPLE BERNOULLI (10)",
		"SELECT CURRENT_DATE, coalesce(1, 2), 1 + 2, CAST('1' AS int)",
	} {
		if _, err := p.Prepare(q, 10); err != nil {
			t.Errorf("Prepare(%q) = %v, want allowed", q, err)
		}
	}
	for q, detail := range map[string]string{
		"SELECT upper('a')":                              "function upper is not on the allowlist",
		"SELECT substring('abc' FROM 1)":                 "function pg_catalog.substring is not on the allowlist",
		"SELECT 1 FROM customers TABLESAMPLE SYSTEM (1)": "function system is not on the allowlist",
		"SELECT * FROM generate_series(1, 2)":            "function generate_series is not on the allowlist",
		"SELECT pg_sleep(1)":                             "function pg_sleep is not allowed",
	} {
		_, err := p.Prepare(q, 10)
		wantProblem(t, err, problem.QueryViolation, detail)
	}

	none := newTestPolicy(t, WithAllowedFunctions())
	_, err := none.Prepare("SELECT lower('A')", 10)
	wantProblem(t, err, problem.QueryViolation, "function lower is not on the allowlist")
	if _, err := none.Prepare("SELECT 1 + 1", 10); err != nil {
		t.Errorf("empty allowlist refused a query without functions: %v", err)
	}
}

func TestDenyRulesMatch(t *testing.T) {
	p := newTestPolicy(t)
	denied := []string{
		"dblink", "dblink_exec", "http", "http_post", "lo_import", "lo_from_bytea", "loread", "lowrite",
		"pg_advisory_lock", "pg_advisory_unlock_all", "pg_try_advisory_xact_lock_shared",
		"pg_sleep", "pg_sleep_for", "pg_sleep_until", "pg_read_file", "pg_read_binary_file",
		"pg_ls_dir", "pg_ls_tmpdir", "pg_stat_file", "pg_file_write", "pg_logdir_ls",
		"pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile",
		"pg_log_backend_memory_contexts", "pg_promote", "set_config", "setseed", "pg_notify",
		"pg_create_physical_replication_slot", "pg_copy_logical_replication_slot", "pg_replication_slot_advance",
		"pg_sync_replication_slots", "pg_replication_origin_session_setup", "pg_logical_emit_message",
		"pg_switch_wal", "pg_wal_replay_resume", "pg_create_restore_point", "pg_backup_stop",
		"pg_start_backup", "pg_stop_backup", "pg_log_standby_snapshot", "pg_stat_reset_shared",
		"pg_stat_statements_reset", "pg_buffercache_evict", "nextval", "setval", "txid_current",
		"pg_current_xact_id", "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema",
		"cursor_to_xml", "cursor_to_xmlschema", "table_to_xml_and_xmlschema", "schema_to_xml",
		"database_to_xmlschema", "ts_stat", "ts_rewrite", "crosstab", "crosstab3", "connectby",
		"xpath_table", "brin_summarize_range", "brin_desummarize_range", "gin_clean_pending_list",
		"pg_truncate_visibility_map", "heap_force_kill", "pg_import_system_collations", "pg_nextoid",
		"binary_upgrade_set_next_heap_pg_class_oid", "pg_set_relation_stats", "pg_clear_attribute_stats",
		"pg_restore_relation_stats",
	}
	for _, name := range denied {
		if _, ok := p.denied(name); !ok {
			t.Errorf("%s is not denied", name)
		}
	}
	allowed := []string{
		"lower", "count", "now", "currval", "lastval", "pg_typeof", "pg_backend_pid", "current_setting",
		"xpath", "to_tsvector", "pg_get_viewdef", "pg_current_xact_id_if_assigned",
		"PG_SLEEP", "nextval2", "lo", "pg_stat_get_live_tuples", "pg_relation_size", "generate_series",
	}
	for _, name := range allowed {
		if r, ok := p.denied(name); ok {
			t.Errorf("%s is denied by %q", name, r.Pattern)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"abc", "abc", true},
		{"abc", "abcd", false},
		{"abc*", "abc", true},
		{"abc*", "abcdef", true},
		{"*", "", true},
		{"pg_*advisory*", "pg_advisory_lock", true},
		{"pg_*advisory*", "pg_try_advisory_lock", true},
		{"pg_*advisory*", "pg_advisor", false},
		{"pg_set_*_stats", "pg_set_relation_stats", true},
		{"pg_set_*_stats", "pg_set_relation_stats_x", false},
		{"a*b*c", "a_b_b_c", true},
		{"a*b*c", "acb", false},
		{"lo_*", "lo/x", false},
		{"lo_*", "lo_/x[?]", true},
	}
	for _, tt := range tests {
		if got := globMatch(tt.pattern, tt.name); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// TestDenylistDocumented keeps docs/sql-policy.md in step with the
// built-in denylist: every pattern must appear there.
func TestDenylistDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/sql-policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range denyRules {
		if !strings.Contains(string(doc), "`"+r.Pattern+"`") {
			t.Errorf("docs/sql-policy.md does not list the denylist pattern %q", r.Pattern)
		}
	}
}

// deepQueries are inputs at or past the nesting guards. Without the guards
// some of them crash the process inside the C parser.
var deepQueries = []struct {
	name, query, detail string
}{
	{"long operator chain", "SELECT " + strings.Repeat("1+", 32000) + "1",
		"query is too complex: more than 2048 operators, keywords and brackets"},
	{"long cast chain", "SELECT 1" + strings.Repeat("::int", 3000),
		"query is too complex: more than 2048 operators, keywords and brackets"},
	{"long postfix chain", "SELECT 1" + strings.Repeat(" ISNULL", 9000),
		"query is too complex: more than 2048 operators, keywords and brackets"},
	{"long join chain", "SELECT 1 FROM t" + strings.Repeat(" CROSS JOIN t", 4000),
		"query is too complex: more than 2048 operators, keywords and brackets"},
	{"operator chain under the token guard", "SELECT " + strings.Repeat("1+", 2040) + "1",
		"query is nested more than 1000 levels deep"},
	{"subscripts under the token guard", "SELECT " + strings.Repeat("a[", 2040) + "1" + strings.Repeat("]", 2040),
		"query is nested more than 1000 levels deep"},
	{"union chain under the token guard", "SELECT 1" + strings.Repeat(" UNION SELECT 1", 1020),
		"query is nested more than 1000 levels deep"},
	{"padded chain under the token guard", "SELECT " + strings.Repeat("1+", 2040) + "1" + strings.Repeat(", 12345678", 3000),
		"query is nested more than 1000 levels deep"},
	{"parentheses", "SELECT " + strings.Repeat("(", 3000) + "1" + strings.Repeat(")", 3000),
		"query is too complex: more than 2048 operators, keywords and brackets"},
	{"subqueries", "SELECT " + strings.Repeat("(SELECT ", 1000) + "1" + strings.Repeat(")", 1000),
		"query is nested more than 1000 levels deep"},
}

// wideQueries are long but flat and must pass the guards.
var wideQueries = []string{
	"SELECT 1 WHERE 1 IN (" + strings.Repeat("1, ", 15000) + "1)",
	"SELECT " + strings.Repeat("id, ", 5000) + "id FROM customers",
	"SELECT " + strings.Repeat("1+", 400) + "1",
	"SELECT 1" + strings.Repeat(" UNION SELECT 1", 900),
}

func TestNestingGuards(t *testing.T) {
	p := newTestPolicy(t)
	for _, tt := range deepQueries {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Prepare(tt.query, 10)
			wantProblem(t, err, problem.QueryViolation, tt.detail)
		})
	}
	for _, q := range wideQueries {
		if _, err := p.Prepare(q, 10); err != nil {
			t.Errorf("wide query of %d bytes refused: %v", len(q), err)
		}
	}
}

func TestStructuralUpperBound(t *testing.T) {
	// The cheap count must never be below what the lexer counts, or a
	// query could skip the lexer pass with too many nesting tokens.
	for _, q := range append(wideQueries, analyticsQuery, "SELECT a.b::int[] FROM x WHERE y <= $1 AND z ~~* 'q'",
		"SELECT U&\"\\0061\" || E'\\n' -- c\n/* d */", "SELECT 0x1F, 1_000, 1.5e3, $$x$$, B'1'") {
		res, err := structuralTokens(q)
		if err != nil {
			t.Fatal(err)
		}
		if ub := structuralUpperBound(q); ub < res {
			t.Errorf("structuralUpperBound = %d < lexer count %d for %.60q", ub, res, q)
		}
	}
}

// TestStackSafety re-runs the nesting tests in a child process whose
// threads get 2 MiB stacks, a quarter of the usual 8 MiB: the guards must
// keep libpg_query's unchecked recursion inside that.
func TestStackSafety(t *testing.T) {
	if os.Getenv("SQLQUERY_STACK_CHILD") == "1" {
		t.Skip("running as the child")
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to set the stack limit")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sh, "-c", `ulimit -s 2048 && exec "$0" -test.run '^(TestNestingGuards|TestCorpus)$' -test.count=1`, exe)
	cmd.Env = append(os.Environ(), "SQLQUERY_STACK_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child with 2 MiB stacks failed: %v\n%s", err, out)
	}
}

func TestPrepareConcurrent(t *testing.T) {
	p := newTestPolicy(t)
	entries := loadCorpus(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(entries); i += 8 {
				e := entries[i]
				_, err := p.Prepare(e.SQL, corpusMaxRows)
				if (err == nil) != (e.Verdict == "allow") {
					t.Errorf("Prepare(%q) = %v concurrently, want %s", e.SQL, err, e.Verdict)
				}
			}
		}()
	}
	wg.Wait()
}

// TestRecheck feeds the second validation SQL that a faulty deparser
// could have written for the checked tree of "SELECT 1 LIMIT 11":
// each must be refused.
func TestRecheck(t *testing.T) {
	p := newTestPolicy(t)
	tree, _, prob := p.parseOne("SELECT 1 LIMIT 11")
	if prob != nil {
		t.Fatal(prob)
	}
	checked, err := encode(tree)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, sql, detail string
	}{
		{"comment", "SELECT 1 LIMIT 11 -- x", "query could not be regenerated without comments"},
		{"block comment", "SELECT 1 /* x */ LIMIT 11", "query could not be regenerated without comments"},
		{"different tree", "SELECT 2 LIMIT 11", notFaithful},
		{"lost limit", "SELECT 1", notFaithful},
		{"other limit", "SELECT 1 LIMIT 12", notFaithful},
		{"with ties", "SELECT 1 ORDER BY 1 FETCH FIRST 11 ROWS WITH TIES", notFaithful},
		{"does not parse", "SELECT 1 LIMIT", notFaithful},
		{"second statement", "SELECT 1 LIMIT 11; SELECT 2", "only one statement is allowed"},
		{"denied function", "SELECT pg_sleep(1) LIMIT 11", "function pg_sleep is not allowed"},
		{"not a select", "DELETE FROM t", "statement type DeleteStmt is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prob := p.recheck(&Prepared{SQL: tt.sql, Limit: 10}, checked)
			if prob == nil {
				t.Fatalf("recheck accepted %q", tt.sql)
			}
			wantProblem(t, prob, problem.QueryViolation, tt.detail)
		})
	}
	if prob := p.recheck(&Prepared{SQL: "SELECT 1 LIMIT 11", Limit: 10}, checked); prob != nil {
		t.Errorf("recheck refused the faithful SQL: %v", prob)
	}
	if prob := p.recheck(&Prepared{SQL: "SELECT '--', '/*' LIMIT 11", Limit: 10}, checked); prob == nil ||
		prob.Detail != notFaithful {
		t.Errorf("recheck of a different tree with comment markers in strings = %v, want %q", prob, notFaithful)
	}
}

// TestOneofChildEveryNodeMember checks the walk's shortcut through Node's
// Go type against protoreflect for every member of Node's oneof: a member
// the shortcut misread would be a subtree the walk never judges.
func TestOneofChildEveryNodeMember(t *testing.T) {
	md := (&pg.Node{}).ProtoReflect().Descriptor()
	od := md.Oneofs().ByName("node")
	if od == nil || md.Oneofs().Len() != 1 {
		t.Fatalf("Node has oneofs %v, want exactly \"node\"", md.Oneofs())
	}
	if ch, prob := oneofChild((&pg.Node{}).ProtoReflect(), od); ch != nil || prob != nil {
		t.Errorf("oneofChild(empty Node) = %v, %v; want nothing", ch, prob)
	}
	for i := range od.Fields().Len() {
		fd := od.Fields().Get(i)
		m := (&pg.Node{}).ProtoReflect()
		inner := m.NewField(fd).Message()
		m.Set(fd, protoreflect.ValueOfMessage(inner))
		if got := m.WhichOneof(od); got != fd {
			t.Fatalf("%s: protoreflect reports %v set", fd.Name(), got)
		}
		ch, prob := oneofChild(m, od)
		if prob != nil || ch == nil || ch.Interface() != inner.Interface() {
			t.Errorf("oneofChild(Node{%s}) = %v, %v; want the %s set in it", fd.Name(), ch, prob, fd.Message().Name())
		}
	}
}

// mustEncode parses sql and returns the encoding of its tree.
func mustEncode(tb testing.TB, sql string) []byte {
	tb.Helper()
	tree, err := pg.Parse(sql)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := encode(tree)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestSameEncoding compares the encodings of two parses: trees that differ
// only in byte offsets are the same, any other difference is not, and an
// encoding that is cut short or corrupted is never the same as anything.
func TestSameEncoding(t *testing.T) {
	md := (&pg.ParseResult{}).ProtoReflect().Descriptor()
	tests := []struct {
		a, b string
		same bool
	}{
		{"SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = 1", true},
		{"SELECT a FROM t WHERE b = 1", "  SELECT   a\nFROM t   WHERE b=1  ", true},
		{"SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = 2", false},
		{"SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE c = 1", false},
		{"SELECT a FROM t WHERE b = 1", "SELECT a FROM t WHERE b = 1 AND true", false},
		{"SELECT a FROM t", "SELECT a, a FROM t", false},
		{"SELECT a FROM t", "SELECT a FROM t LIMIT 1", false},
		{"SELECT 'x'", "SELECT 'y'", false},
		{"SELECT 'x'", "SELECT 'x'::text", false},
		{"SELECT 1", "SELECT 1.0", false},
	}
	for _, tt := range tests {
		a, b := mustEncode(t, tt.a), mustEncode(t, tt.b)
		if got := sameEncoding(md, a, b); got != tt.same {
			t.Errorf("sameEncoding(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.same)
		}
		if got := sameEncoding(md, b, a); got != tt.same {
			t.Errorf("sameEncoding(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.same)
		}
	}
	full := mustEncode(t, "SELECT a FROM t WHERE b = 1")
	for i := range len(full) {
		if sameEncoding(md, full[:i], full) || sameEncoding(md, full, full[:i]) {
			t.Errorf("an encoding cut to %d of %d bytes is the same as the whole", i, len(full))
		}
		bad := append([]byte(nil), full...)
		bad[i] ^= 0xff
		if sameEncoding(md, bad, full) || sameEncoding(md, full, bad) {
			t.Errorf("an encoding with byte %d flipped is the same as the original", i)
		}
	}
}

func TestHasComment(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT 1":                false,
		"SELECT '--', '/*'":       false,
		`SELECT "--"`:             false,
		"SELECT $$--$$":           false,
		"SELECT 1 -- x":           true,
		"SELECT 1 /* x */":        true,
		"SELECT 1 - -1":           false,
		"SELECT 1 --":             true,
		"SELECT 'unterminated /*": true,
	} {
		if got := hasComment(sql); got != want {
			t.Errorf("hasComment(%q) = %v, want %v", sql, got, want)
		}
	}
}
