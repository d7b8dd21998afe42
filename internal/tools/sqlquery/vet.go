package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// The catalog check. The denylist judges PostgreSQL's own functions by
// name; a function of the database can be called anything, so each name a
// query calls is also looked up in the catalog the way PostgreSQL would
// look it up: a qualified name in its schema, an unqualified one in every
// schema of the connection's effective search_path. The query is refused
// when any function it could resolve to was not created by initdb (its
// oid is FirstNormalObjectId or above: a function of the database, or of
// an extension, wherever it lives, pg_catalog included) and is VOLATILE —
// or is an aggregate with a VOLATILE support function, since CREATE
// AGGREGATE marks every aggregate IMMUTABLE whatever its functions do —
// unless the operator allowed that function by its schema-qualified name
// ([ExecOptions.AllowFunctions]).
// Argument types are not resolved: when several functions share the name,
// the check refuses if any could be the one called.
//
// What it cannot see, because no name appears in the tree: operators and
// casts backed by functions, a domain's CHECK constraint, a view's
// definition, a STABLE or IMMUTABLE label that lies. The session-effect
// check (effects.go), the read-only transaction and the role cover those.

// vetSQL resolves the names of one query. The four arrays are, per name,
// its schema ("" when unqualified), its name, whether it came from
// attribute notation (then only a function taking one argument can be
// meant), and whether the policy refuses the name itself (an attribute
// name: then any function it could call refuses it, PostgreSQL's own
// included). A row is a function that refuses the name at index i.
const vetSQL = `SELECT r.i::pg_catalog.int8, n.nspname::pg_catalog.text, p.proname::pg_catalog.text
FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[]),
    pg_catalog.unnest($3::pg_catalog.bool[]), pg_catalog.unnest($4::pg_catalog.bool[]))
  WITH ORDINALITY AS r(sch, fn, attr, named, i)
JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) r.fn
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
LEFT JOIN pg_catalog.pg_aggregate a ON a.aggfnoid OPERATOR(pg_catalog.=) p.oid
WHERE CASE
        WHEN r.sch OPERATOR(pg_catalog.=) '' THEN n.nspname OPERATOR(pg_catalog.=) ANY (pg_catalog.current_schemas(true))
        WHEN r.sch OPERATOR(pg_catalog.=) 'pg_temp' THEN n.oid OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema()
        ELSE n.nspname OPERATOR(pg_catalog.=) r.sch
      END
  AND (NOT r.attr OR (p.pronargs OPERATOR(pg_catalog.>=) 1 AND p.pronargs OPERATOR(pg_catalog.-) p.pronargdefaults OPERATOR(pg_catalog.<=) 1))
  AND (r.named OR p.oid OPERATOR(pg_catalog.>=) 16384::pg_catalog.oid) -- FirstNormalObjectId: not PostgreSQL's own
  AND (r.named OR p.provolatile OPERATOR(pg_catalog.=) 'v' OR EXISTS (
        SELECT FROM pg_catalog.pg_proc s
        WHERE s.oid OPERATOR(pg_catalog.=) ANY (ARRAY[a.aggtransfn, a.aggfinalfn, a.aggcombinefn, a.aggserialfn,
              a.aggdeserialfn, a.aggmtransfn, a.aggminvtransfn, a.aggmfinalfn]::pg_catalog.oid[])
          AND s.provolatile OPERATOR(pg_catalog.=) 'v'))`

// vetTTL bounds how long a resolution is trusted: a function created or
// changed in the database is seen by the check within this time.
const vetTTL = time.Minute

// vetMaxEntries bounds the cache; past it, it starts over.
const vetMaxEntries = 4096

// vetCache holds resolutions for a generation of the pool's connections:
// a resolution is keyed by the search_path the connection reported when
// its transaction began, so connections that resolve alike share it, and
// it expires after vetTTL. It is safe for concurrent use.
type vetCache struct {
	mu      sync.Mutex
	entries map[vetKey]vetEntry
}

type vetKey struct {
	schemas string // current_schemas(true) as text
	ref     FuncRef
}

type vetEntry struct {
	refused string // the function that refuses the name, "" when none
	at      time.Time
}

// lookup returns the cached resolution of k.
func (c *vetCache) lookup(k vetKey, now time.Time) (vetEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || now.Sub(e.at) > vetTTL {
		return vetEntry{}, false
	}
	return e, true
}

func (c *vetCache) store(k vetKey, e vetEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= vetMaxEntries {
		c.entries = make(map[vetKey]vetEntry)
	}
	c.entries[k] = e
}

// vet checks the functions of a query in the catalog, from the cache
// where it can, in one round trip on conn (inside the query's
// transaction, before the query runs) for the rest. schemas is the
// connection's effective search_path. It returns a *problem.Problem for a
// refused function.
func (e *Executor) vet(ctx context.Context, conn *pgx.Conn, schemas string, funcs []FuncRef) error {
	now := time.Now()
	var missing []FuncRef
	for _, ref := range funcs {
		hit, ok := e.vetted.lookup(vetKey{schemas, ref}, now)
		switch {
		case !ok:
			missing = append(missing, ref)
		case hit.refused != "":
			return volatileProblem(ref, hit.refused)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sch, names := make([]string, len(missing)), make([]string, len(missing))
	attr, named := make([]bool, len(missing)), make([]bool, len(missing))
	for i, ref := range missing {
		sch[i], names[i], attr[i], named[i] = ref.Schema, ref.Name, ref.Attribute, ref.Refused != ""
	}
	rows, err := conn.Query(ctx, vetSQL, execMode, sch, names, attr, named)
	if err != nil {
		return e.classify(ctx, "catalog check", err)
	}
	refused := make([]string, len(missing))
	for rows.Next() {
		var i int64
		var schema, name string
		if err := rows.Scan(&i, &schema, &name); err != nil || i < 1 || i > int64(len(missing)) {
			rows.Close()
			return errors.Join(errDatabase, err)
		}
		// MCP_SQL_ALLOW_FUNCTIONS never overrides the policy: an allowed
		// name still has to pass the denylist.
		_, allowed := e.allow[qualifiedName{schema, name}]
		if (!allowed || missing[i-1].Refused != "") && refused[i-1] == "" {
			refused[i-1] = displayName([]string{schema, name})
		}
	}
	if err := rows.Err(); err != nil {
		return e.classify(ctx, "catalog check", err)
	}
	var prob error
	for i, ref := range missing {
		e.vetted.store(vetKey{schemas, ref}, vetEntry{refused: refused[i], at: now})
		if refused[i] != "" && prob == nil {
			prob = volatileProblem(ref, refused[i])
		}
	}
	return prob
}

// volatileProblem refuses ref, which may call the function fn: a VOLATILE
// function of the database, or one the policy refuses by name.
func volatileProblem(ref FuncRef, fn string) *problem.Problem {
	if ref.Refused != "" {
		return violation(fmt.Sprintf("%s may call, through attribute notation, %s, and function %s %s",
			displayName(refParts(ref)), fn, displayName([]string{ref.Name}), ref.Refused)).WithMetadata("function", fn)
	}
	how := "calls"
	if ref.Attribute {
		how = "may call, through attribute notation,"
	}
	return violation(fmt.Sprintf("%s %s %s, a VOLATILE function of the database; "+
		"functions that may have side effects are refused unless MCP_SQL_ALLOW_FUNCTIONS names them",
		displayName(refParts(ref)), how, fn)).WithMetadata("function", fn)
}

func refParts(ref FuncRef) []string {
	if ref.Schema == "" {
		return []string{ref.Name}
	}
	return []string{ref.Schema, ref.Name}
}

// qualifiedName is a function's schema and name as the catalog holds them.
type qualifiedName struct{ schema, name string }

// ParseFunctionList reads a comma-separated list of schema-qualified
// function names (MCP_SQL_ALLOW_FUNCTIONS): each is schema.function, every
// part an identifier as SQL writes it — unquoted (folded to lower case) or
// in double quotes. The result is in canonical form ("schema.function",
// quoted where needed). An allowed name still has to pass the denylist.
func ParseFunctionList(s string) ([]string, error) {
	var out []string
	for i, item := range splitList(s) {
		parts, err := parseQualified(strings.TrimSpace(item))
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		out = append(out, sqlIdent(parts[0])+"."+sqlIdent(parts[1]))
	}
	if len(out) == 0 {
		return nil, errors.New("names no function")
	}
	return out, nil
}

// sqlIdent writes an identifier as SQL reads it back: plain when it can
// be, else in double quotes.
func sqlIdent(s string) string {
	if plainIdentifier(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// splitList splits s at commas outside double quotes.
func splitList(s string) []string {
	var items []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				items = append(items, s[start:i])
				start = i + 1
			}
		}
	}
	return append(items, s[start:])
}

// parseQualified reads schema.function into its two identifiers.
func parseQualified(s string) ([]string, error) {
	var parts []string
	for s != "" {
		var id string
		if s[0] == '"' {
			end := 1
			var b strings.Builder
			for {
				j := strings.IndexByte(s[end:], '"')
				if j < 0 {
					return nil, fmt.Errorf("%s: unterminated quoted identifier", problem.Quote(s))
				}
				b.WriteString(s[end : end+j])
				end += j + 1
				if end < len(s) && s[end] == '"' {
					b.WriteByte('"')
					end++
					continue
				}
				break
			}
			id, s = b.String(), s[end:]
		} else {
			j := strings.IndexByte(s, '.')
			if j < 0 {
				j = len(s)
			}
			id, s = strings.ToLower(s[:j]), s[j:]
			if !plainIdentifier(id) {
				return nil, fmt.Errorf("%s is not an identifier; quote it", problem.Quote(id))
			}
		}
		if !validFunctionName(id) {
			return nil, fmt.Errorf("%s is not a valid name", problem.Quote(id))
		}
		parts = append(parts, id)
		if s != "" {
			if s[0] != '.' || len(s) == 1 {
				return nil, fmt.Errorf("%s: expected schema.function", problem.Quote(s))
			}
			s = s[1:]
		}
	}
	if len(parts) != 2 {
		return nil, errors.New("is not schema-qualified")
	}
	return parts, nil
}
