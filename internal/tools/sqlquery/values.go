package sqlquery

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mcp-bastion/bastion/internal/jsondec"
)

// The PostgreSQL → JSON mapping. Every column is fetched in PostgreSQL's
// text format, which is the exact value for every type, and mapped from
// that text, so nothing loses precision on the way:
//
//	bool                         → true/false
//	int2, int4, oid              → number
//	int8                         → number when |v| ≤ 2^53−1, else a string of the exact digits
//	float4, float8               → number, as PostgreSQL prints it (shortest exact form);
//	                               NaN, Infinity, -Infinity → those strings
//	numeric                      → string of the exact decimal text (also NaN, Infinity)
//	json, jsonb                  → the JSON value itself, when it is strict JSON (no
//	                               duplicate names), every number a finite double and
//	                               nesting at most maxEmbeddedDepth; else its text as a
//	                               string
//	bytea                        → base64 string (standard alphabet, padded)
//	timestamptz                  → RFC 3339 string in UTC with the stored microseconds
//	                               ("2024-05-01T12:00:00.123456Z"); infinity and BC values
//	                               keep PostgreSQL's text
//	timestamp                    → "2024-05-01T12:00:00.123456" (no zone); infinity and BC
//	                               values keep PostgreSQL's text
//	arrays                       → JSON arrays (nested for several dimensions) of the
//	                               element type's mapping, NULL elements → null
//	NULL                         → null
//	everything else              → PostgreSQL's text output as a string: text, varchar,
//	                               char, "char", name, uuid, date, time, timetz, interval
//	                               (ISO 8601, "P1DT2H"), inet, cidr, macaddr, money, xml,
//	                               enums, ranges, composites, xid8, extension types
//
// Text that is not valid UTF-8, which only a SQL_ASCII database can hold,
// has each invalid byte replaced by U+FFFD: JSON cannot carry it.
//
// Queries run with TimeZone UTC, DateStyle ISO, IntervalStyle iso_8601,
// extra_float_digits 1 and bytea_output hex (transaction-local), so the
// text forms above are fixed whatever the role or database defaults say.

// arrayInfo describes an array type for the mapping.
type arrayInfo struct {
	elem  uint32 // element type, domains resolved to their base type
	delim byte   // element delimiter in the text form
}

// arrayTypes is what the mapping knows of array types beyond pgx's type
// map: built-in arrays pgx does not register, and, per query, arrays of
// the database's own types (looked up in pg_type, see Executor.run).
type arrayTypes map[uint32]arrayInfo

// builtinArrays are PostgreSQL's built-in array types that pgx v5 does not
// register, with their element types. OIDs of built-in types are fixed.
var builtinArrays = arrayTypes{
	1002: {elem: 18, delim: ','},   // "char"[]
	1270: {elem: 1266, delim: ','}, // timetz[]
	791:  {elem: 790, delim: ','},  // money[]
	271:  {elem: 5069, delim: ','}, // xid8[]
	143:  {elem: 142, delim: ','},  // xml[]
	1040: {elem: 829, delim: ','},  // macaddr[]
	775:  {elem: 774, delim: ','},  // macaddr8[]
	2951: {elem: 2950, delim: ','}, // uuid[]
}

// boxOID is the one built-in type whose array text separates elements
// with ';' instead of ','.
const boxOID = 603

// array returns the element type and delimiter of oid when it is an array
// type.
func (at arrayTypes) array(tm *pgtype.Map, oid uint32) (arrayInfo, bool) {
	if t, ok := tm.TypeForOID(oid); ok {
		if ac, isArray := t.Codec.(*pgtype.ArrayCodec); isArray {
			info := arrayInfo{elem: ac.ElementType.OID, delim: ','}
			if info.elem == boxOID {
				info.delim = ';'
			}
			return info, true
		}
		return arrayInfo{}, false
	}
	if info, ok := builtinArrays[oid]; ok {
		return info, true
	}
	info, ok := at[oid]
	return info, ok
}

// known reports whether the mapping of oid is settled without a catalog
// lookup: a type pgx or builtinArrays knows.
func known(tm *pgtype.Map, oid uint32) bool {
	if _, ok := tm.TypeForOID(oid); ok {
		return true
	}
	_, ok := builtinArrays[oid]
	return ok
}

// columnJSON maps one column value from its text form.
func columnJSON(tm *pgtype.Map, at arrayTypes, oid uint32, raw []byte) (any, error) {
	if raw == nil {
		return nil, nil
	}
	if info, ok := at.array(tm, oid); ok {
		return arrayJSON(tm, at, info, raw)
	}
	return scalarJSON(oid, raw)
}

// arrayJSON maps an array from its text form. pgx parses the text (quoting,
// escapes, NULL, dimension decorations); each element is then mapped by
// its own type, exactly as a column of that type would be.
func arrayJSON(tm *pgtype.Map, at arrayTypes, info arrayInfo, raw []byte) (any, error) {
	if info.delim != ',' {
		// pgx's parser splits on ',' only: keep the text whole rather
		// than split it wrongly.
		return textJSON(raw), nil
	}
	var arr pgtype.Array[pgtype.Text]
	if err := tm.Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, raw, &arr); err != nil {
		// Not array text after all: int2vector and oidvector are in the
		// catalog's array category but print "1 2". Their text is the
		// value.
		return textJSON(raw), nil
	}
	flat := make([]any, len(arr.Elements))
	for i, e := range arr.Elements {
		if !e.Valid {
			continue
		}
		// An element may itself be an array: a domain over one.
		v, err := columnJSON(tm, at, info.elem, []byte(e.String))
		if err != nil {
			return nil, err
		}
		flat[i] = v
	}
	return nest(flat, arr.Dims)
}

// nest rebuilds the dimensions of an array whose elements arrive flat: a
// 2×2 array becomes [[a,b],[c,d]].
func nest(flat []any, dims []pgtype.ArrayDimension) (any, error) {
	if len(dims) <= 1 {
		return flat, nil
	}
	var build func(dim, off int) ([]any, int)
	build = func(dim, off int) ([]any, int) {
		out := make([]any, dims[dim].Length)
		for i := range out {
			if dim == len(dims)-1 {
				out[i] = flat[off]
				off++
				continue
			}
			out[i], off = build(dim+1, off)
		}
		return out, off
	}
	n := 1
	for _, d := range dims {
		n *= int(d.Length)
	}
	if n != len(flat) {
		return nil, errors.New("array: dimensions do not match its elements")
	}
	nested, _ := build(0, 0)
	return nested, nil
}

// maxEmbeddedDepth bounds the nesting of a json value embedded as JSON.
// A value sits five levels inside the response (result, structuredContent,
// rows, the row), and the gateway refuses a message nested deeper than 64;
// 32 leaves room for either and for any reader's recursion.
const maxEmbeddedDepth = 32

// scalarJSON maps a value of type oid from its text form.
func scalarJSON(oid uint32, raw []byte) (any, error) {
	s := string(raw)
	switch oid {
	case pgtype.BoolOID:
		switch s {
		case "t":
			return true, nil
		case "f":
			return false, nil
		}
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.OIDOID:
		if isInteger(s) {
			return jsontext.Value(s), nil
		}
	case pgtype.Int8OID:
		if isInteger(s) {
			if safeInteger(s) {
				return jsontext.Value(s), nil
			}
			return s, nil
		}
	case pgtype.Float4OID, pgtype.Float8OID:
		switch s {
		case "NaN", "Infinity", "-Infinity":
			return s, nil
		}
		if v := jsontext.Value(s); v.Kind() == '0' && v.IsValid() {
			return v, nil
		}
	case pgtype.JSONOID, pgtype.JSONBOID:
		// PostgreSQL's json keeps duplicate names verbatim; such a value
		// is not embedded as JSON (this server never emits duplicates).
		// Nor is one a reader could not take as it is: a number beyond
		// a double (1e999 reads as infinity), or nesting deep enough to
		// exhaust a reader's recursion or the bound a relay puts on a
		// whole message.
		if v := jsontext.Value(s); v.IsValid() && jsondec.Portable(v, maxEmbeddedDepth) {
			return v, nil
		}
		return textJSON(raw), nil
	case pgtype.ByteaOID:
		if b, err := hex.DecodeString(strings.TrimPrefix(s, `\x`)); err == nil && strings.HasPrefix(s, `\x`) {
			return base64.StdEncoding.EncodeToString(b), nil
		}
	case pgtype.TimestamptzOID:
		return rfc3339UTC(textJSON(raw)), nil
	case pgtype.TimestampOID:
		t := textJSON(raw)
		if date, clock, ok := strings.Cut(t, " "); ok && !strings.Contains(clock, " ") {
			return date + "T" + clock, nil
		}
		return t, nil
	default:
		return textJSON(raw), nil
	}
	// PostgreSQL printed something its own type does not print.
	return nil, fmt.Errorf("unexpected text for type oid %d", oid)
}

// textJSON is text as a JSON string can carry it.
func textJSON(raw []byte) string {
	return strings.ToValidUTF8(string(raw), "\uFFFD")
}

// rfc3339UTC turns PostgreSQL's ISO output in UTC ("2024-05-01
// 12:00:00.5+00") into RFC 3339 ("2024-05-01T12:00:00.5Z"). Values it does
// not recognise (infinity, BC values) are returned unchanged.
func rfc3339UTC(s string) string {
	date, clock, ok := strings.Cut(s, " ")
	if !ok || strings.Contains(clock, " ") || !strings.HasSuffix(clock, "+00") {
		return s
	}
	return date + "T" + strings.TrimSuffix(clock, "+00") + "Z"
}

// isInteger reports whether s is an optional '-' and decimal digits,
// which is how PostgreSQL prints every integer type and a valid JSON
// number.
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// safeInteger reports whether the integer s (as isInteger accepts it) is
// within ±(2^53−1), the range every JSON reader holds exactly.
func safeInteger(s string) bool {
	const maxSafe = "9007199254740991"
	d := strings.TrimPrefix(s, "-")
	return len(d) < len(maxSafe) || len(d) == len(maxSafe) && d <= maxSafe
}
