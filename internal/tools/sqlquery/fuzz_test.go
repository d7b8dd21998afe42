package sqlquery

import (
	"testing"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// FuzzPrepare checks the policy's invariants on arbitrary text. Besides
// not panicking (or crashing the C parser):
//   - every refusal is a *problem.Problem of code MCP_VALIDATION_ERROR or
//     MCP_QUERY_VIOLATION, never an internal error;
//   - every accepted query deparses to exactly one SELECT with no
//     comment, its Limit is max_rows, and preparing that SQL again
//     returns it unchanged, with the same functions to vet.
//
// Seeds: testdata/fuzz/FuzzPrepare plus the whole policy corpus.
func FuzzPrepare(f *testing.F) {
	for _, e := range loadCorpus(f) {
		f.Add(e.SQL, int64(corpusMaxRows))
	}
	p := newTestPolicy(f)
	f.Fuzz(func(t *testing.T, query string, maxRows int64) {
		prep, err := p.Prepare(query, maxRows)
		if err != nil {
			prob := asProblem(t, err)
			if prob.Code != problem.Validation && prob.Code != problem.QueryViolation {
				t.Fatalf("Prepare(%q, %d) = %s %q, want a validation or policy problem", query, maxRows, prob.Code, prob.Detail)
			}
			return
		}
		checkPrepared(t, p, prep, maxRows)
	})
}
