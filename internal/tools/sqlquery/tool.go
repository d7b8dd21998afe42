package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/tool"
)

// Name is the tool's name.
const Name = "read_only_sql"

// Input is the arguments of read_only_sql.
type Input struct {
	Query   string `json:"query"`
	MaxRows *int64 `json:"max_rows,omitempty"`
}

// Tool is the read_only_sql tool: policy, then executor. Close releases the
// pool.
type Tool struct {
	tool.Tool
	exec    *Executor
	policy  *Policy
	maxRows int64
}

var (
	_ tool.Tool = (*Tool)(nil)
	_ io.Closer = (*Tool)(nil)
)

// NewTool returns read_only_sql over exec with policy, clamping every
// result to at most maxRows rows (the default when the caller gives no
// max_rows, and the ceiling when it does).
func NewTool(policy *Policy, exec *Executor, maxRows int64) (*Tool, error) {
	if maxRows < 1 || maxRows > MaxRowsCeiling {
		return nil, fmt.Errorf("sqlquery: max rows %d out of range [1, %d]", maxRows, int64(MaxRowsCeiling))
	}
	t := &Tool{exec: exec, policy: policy, maxRows: maxRows}
	inner, err := tool.New(tool.Descriptor{
		Name:  Name,
		Title: "Read-only SQL",
		Description: fmt.Sprintf("Run one read-only PostgreSQL query (a SELECT, set operation, VALUES or TABLE) and return its rows. "+
			"Writes, DDL, utility statements, locking clauses and functions with side effects are refused. "+
			"At most max_rows rows are returned (default and ceiling %d); truncated tells whether rows were cut, by that clamp or by the result size limit. "+
			"Bind parameters are not supported: write literals.", maxRows),
		InputSchema: jsontext.Value(fmt.Sprintf(`{"type":"object","properties":{`+
			`"query":{"type":"string","minLength":1,"maxLength":%d,"description":"One SQL query"},`+
			`"max_rows":{"type":"integer","minimum":1,"maximum":%d,"description":"Most rows to return"}},`+
			`"required":["query"],"additionalProperties":false}`, DefaultMaxQueryBytes, maxRows)),
		OutputSchema: jsontext.Value(`{"type":"object","properties":{` +
			`"columns":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"type":{"type":"string"}},"required":["name","type"],"additionalProperties":false}},` +
			`"rows":{"type":"array","items":{"type":"array"}},` +
			`"row_count":{"type":"integer","minimum":0},` +
			`"truncated":{"type":"boolean"}},` +
			`"required":["columns","rows","row_count","truncated"],"additionalProperties":false}`),
		Annotations: tool.ReadOnly,
	}, t.call)
	if err != nil {
		return nil, err
	}
	t.Tool = inner
	return t, nil
}

func (t *Tool) call(ctx context.Context, in Input) (*ResultSet, error) {
	limit := t.maxRows
	if in.MaxRows != nil {
		limit = min(*in.MaxRows, t.maxRows)
	}
	prep, err := t.policy.Prepare(in.Query, limit)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	return t.exec.Run(ctx, prep)
}

// Close closes the connection pool.
func (t *Tool) Close() error {
	if t.exec == nil {
		return errors.New("sqlquery: no executor")
	}
	return t.exec.Close()
}
