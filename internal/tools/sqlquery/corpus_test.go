package sqlquery

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// corpusEntry is one query of testdata/policy_corpus.json. The file is
// meant to be reused by the executor's tests against a real PostgreSQL,
// so it carries the policy verdict only; the executor adds what the
// database says.
type corpusEntry struct {
	SQL     string `json:"sql"`
	Verdict string `json:"verdict"` // "allow" or "deny"
	Code    string `json:"code"`    // problem code of a deny
	Detail  string `json:"detail"`  // substring of the deny's detail
	Note    string `json:"note"`
	// DBSQLState is the SQLSTATE PostgreSQL raises for an allowed query
	// that the policy passes but the database rejects (e.g. an unknown
	// function), so the executor's run knows to expect it.
	DBSQLState string `json:"db_sqlstate,omitempty"`
	// Executor is how the executor refuses an allowed query that calls
	// code with side effects the tree does not show: "catalog" (the
	// catalog check) or "session effect" (the session-effect check).
	Executor string `json:"executor,omitempty"`
}

// corpusMaxRows is the max_rows every corpus entry is judged with.
const corpusMaxRows = 1000

func loadCorpus(tb testing.TB) []corpusEntry {
	tb.Helper()
	data, err := os.ReadFile("testdata/policy_corpus.json")
	if err != nil {
		tb.Fatal(err)
	}
	var doc struct {
		Comment string        `json:"comment"`
		Entries []corpusEntry `json:"entries"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		tb.Fatalf("policy_corpus.json: %v", err)
	}
	return doc.Entries
}

func newTestPolicy(tb testing.TB, opts ...Option) *Policy {
	tb.Helper()
	p, err := NewPolicy(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// asProblem returns err as a *problem.Problem or fails the test.
func asProblem(tb testing.TB, err error) *problem.Problem {
	tb.Helper()
	var prob *problem.Problem
	if !errors.As(err, &prob) {
		tb.Fatalf("error %v (%T) is not a *problem.Problem", err, err)
	}
	return prob
}

func TestCorpus(t *testing.T) {
	entries := loadCorpus(t)
	if len(entries) < 150 {
		t.Fatalf("corpus has %d entries, want at least 150", len(entries))
	}
	p := newTestPolicy(t)
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if seen[e.SQL] {
			t.Errorf("duplicate corpus entry %q", e.SQL)
		}
		seen[e.SQL] = true
		t.Run(e.Note, func(t *testing.T) {
			prep, err := p.Prepare(e.SQL, corpusMaxRows)
			switch e.Verdict {
			case "allow":
				if err != nil {
					t.Fatalf("Prepare(%q) = %v, want allowed", e.SQL, err)
				}
				checkPrepared(t, p, prep, corpusMaxRows)
			case "deny":
				if err == nil {
					t.Fatalf("Prepare(%q) allowed as %q, want %s", e.SQL, prep.SQL, e.Code)
				}
				prob := asProblem(t, err)
				if string(prob.Code) != e.Code {
					t.Errorf("Prepare(%q) code = %s (%s), want %s", e.SQL, prob.Code, prob.Detail, e.Code)
				}
				if !strings.Contains(prob.Detail, e.Detail) {
					t.Errorf("Prepare(%q) detail = %q, want it to contain %q", e.SQL, prob.Detail, e.Detail)
				}
				if len(prob.InvalidParams) != 1 || prob.InvalidParams[0] != "query" {
					t.Errorf("Prepare(%q) invalid_params = %v, want [query]", e.SQL, prob.InvalidParams)
				}
			default:
				t.Fatalf("entry %q: verdict %q is neither allow nor deny", e.SQL, e.Verdict)
			}
		})
	}
}

// checkPrepared asserts what every accepted query must satisfy; the fuzz
// target asserts the same. The SQL re-parses to exactly one SELECT, holds
// no comment, and is a fixed point: preparing it again gives it back
// unchanged, with the same functions to vet.
func checkPrepared(tb testing.TB, p *Policy, prep *Prepared, maxRows int64) {
	tb.Helper()
	if prep.Limit != maxRows {
		tb.Fatalf("Limit = %d, want max_rows %d", prep.Limit, maxRows)
	}
	tree, err := pg.Parse(prep.SQL)
	if err != nil {
		tb.Fatalf("prepared SQL %q does not parse: %v", prep.SQL, err)
	}
	if n := len(tree.GetStmts()); n != 1 {
		tb.Fatalf("prepared SQL %q has %d statements", prep.SQL, n)
	}
	if tree.GetStmts()[0].GetStmt().GetSelectStmt() == nil {
		tb.Fatalf("prepared SQL %q is not a SELECT", prep.SQL)
	}
	scan, err := pg.Scan(prep.SQL)
	if err != nil {
		tb.Fatalf("prepared SQL %q does not scan: %v", prep.SQL, err)
	}
	for _, tok := range scan.GetTokens() {
		if tok.GetToken() == pg.Token_SQL_COMMENT || tok.GetToken() == pg.Token_C_COMMENT {
			tb.Fatalf("prepared SQL %q contains a comment", prep.SQL)
		}
	}
	again, err := p.Prepare(prep.SQL, maxRows)
	if err != nil {
		tb.Fatalf("Prepare is not idempotent: %q refused the second time: %v", prep.SQL, err)
	}
	if again.SQL != prep.SQL || again.Limit != prep.Limit || !slices.Equal(again.Functions, prep.Functions) {
		tb.Fatalf("Prepare is not a fixed point:\n first  %+v\n second %+v", *prep, *again)
	}
}
