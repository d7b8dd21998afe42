package sqlquery

import (
	"database/sql/driver"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The PostgreSQL → JSON mapping. Nothing may lose precision on the way:
//
//	bool                         → true/false
//	int2, int4                   → number
//	int8                         → number when |v| ≤ 2^53−1, else a string of the exact digits
//	float4, float8               → number (shortest form at the type's own precision);
//	                               NaN, Infinity, -Infinity → those strings
//	numeric                      → string of the exact decimal text (also NaN, Infinity)
//	json, jsonb                  → the JSON value itself, when it is strict JSON (no
//	                               duplicate names); else its text as a string
//	text, varchar, char, name,
//	enums and other text types   → string
//	bytea                        → base64 string (standard alphabet, padded)
//	uuid                         → canonical 8-4-4-4-12 string
//	timestamptz                  → RFC 3339 string in UTC with microseconds as stored
//	                               ("2024-05-01T12:00:00.123456Z"); infinity → "infinity"
//	timestamp                    → "2024-05-01T12:00:00.123456" (no zone)
//	date, time, timetz           → ISO 8601 text ("2024-05-01", "12:00:00")
//	interval                     → ISO 8601 duration ("P1DT2H3M4S")
//	inet, cidr, macaddr, money,
//	and any other type           → PostgreSQL's text output as a string
//	arrays                       → JSON arrays (nested for several dimensions) of the above
//	NULL                         → null
//
// Queries run with TimeZone UTC, DateStyle ISO and IntervalStyle iso_8601
// (transaction-local), so the text forms above are fixed.

// textOIDs are the types fetched in PostgreSQL's text format: their text is
// the exact value, where a binary decode would round it (numeric) or lose
// its spelling (dates, intervals).
var textOIDs = map[uint32]int16{
	pgtype.NumericOID: pgtype.TextFormatCode, pgtype.JSONOID: pgtype.TextFormatCode, pgtype.JSONBOID: pgtype.TextFormatCode,
	pgtype.DateOID: pgtype.TextFormatCode, pgtype.TimestampOID: pgtype.TextFormatCode, pgtype.TimestamptzOID: pgtype.TextFormatCode,
	pgtype.TimeOID: pgtype.TextFormatCode, 1266 /* timetz */ : pgtype.TextFormatCode, pgtype.IntervalOID: pgtype.TextFormatCode,
	pgtype.InetOID: pgtype.TextFormatCode, pgtype.CIDROID: pgtype.TextFormatCode, pgtype.MacaddrOID: pgtype.TextFormatCode,
	790 /* money */ : pgtype.TextFormatCode, pgtype.XMLOID: pgtype.TextFormatCode,
}

const maxSafeInt = 1<<53 - 1

// columnJSON maps one column value from its wire bytes.
func columnJSON(tm *pgtype.Map, fd pgconn.FieldDescription, raw []byte) (any, error) {
	if raw == nil {
		return nil, nil
	}
	oid := fd.DataTypeOID
	if fd.Format == pgtype.TextFormatCode {
		if s, ok := scalarText(oid, string(raw)); ok {
			return s, nil
		}
	}
	t, ok := tm.TypeForOID(oid)
	if !ok {
		// A type pgx does not know (enums, domains, extensions) arrives
		// in text format: its text is the value.
		if fd.Format == pgtype.TextFormatCode {
			return string(raw), nil
		}
		return nil, fmt.Errorf("no JSON mapping for type oid %d", oid)
	}
	if ac, isArray := t.Codec.(*pgtype.ArrayCodec); isArray {
		var arr pgtype.Array[any]
		if err := tm.Scan(oid, fd.Format, raw, &arr); err != nil {
			return nil, err
		}
		return nestArray(arr, ac.ElementType.OID)
	}
	v, err := t.Codec.DecodeValue(tm, oid, fd.Format, raw)
	if err != nil {
		return nil, err
	}
	return goValue(v, oid)
}

// nestArray rebuilds the dimensions pgx flattens: a 2×2 array becomes
// [[a,b],[c,d]].
func nestArray(arr pgtype.Array[any], elem uint32) (any, error) {
	flat := make([]any, len(arr.Elements))
	for i, e := range arr.Elements {
		v, err := goValue(e, elem)
		if err != nil {
			return nil, err
		}
		flat[i] = v
	}
	if len(arr.Dims) <= 1 {
		return flat, nil
	}
	var build func(dim int, off int) ([]any, int)
	build = func(dim, off int) ([]any, int) {
		n := int(arr.Dims[dim].Length)
		out := make([]any, n)
		for i := range n {
			if dim == len(arr.Dims)-1 {
				out[i] = flat[off]
				off++
				continue
			}
			out[i], off = build(dim+1, off)
		}
		return out, off
	}
	nested, _ := build(0, 0)
	return nested, nil
}

// scalarText maps text-format values of the types in textOIDs.
func scalarText(oid uint32, s string) (any, bool) {
	switch oid {
	case pgtype.JSONOID, pgtype.JSONBOID:
		// PostgreSQL's json keeps duplicate names verbatim; such a value
		// is not embedded as JSON (this server never emits duplicates).
		if jsontext.Value(s).IsValid() {
			return jsontext.Value(s), true
		}
		return s, true
	case pgtype.TimestamptzOID:
		return rfc3339UTC(s), true
	case pgtype.TimestampOID:
		return strings.Replace(s, " ", "T", 1), true
	case pgtype.NumericOID, pgtype.DateOID, pgtype.TimeOID, 1266, pgtype.IntervalOID,
		pgtype.InetOID, pgtype.CIDROID, pgtype.MacaddrOID, 790, pgtype.XMLOID:
		return s, true
	}
	return nil, false
}

// rfc3339UTC turns PostgreSQL's ISO output in UTC ("2024-05-01
// 12:00:00.5+00") into RFC 3339 ("2024-05-01T12:00:00.5Z"). Values it does
// not recognise (infinity, BC dates) are returned unchanged.
func rfc3339UTC(s string) string {
	if len(s) < 22 || s[10] != ' ' || !strings.HasSuffix(s, "+00") {
		return s
	}
	return s[:10] + "T" + s[11:len(s)-3] + "Z"
}

// goValue maps a value decoded by pgx; elem is the PostgreSQL type of v
// (for arrays, of the array).
func goValue(v any, oid uint32) (any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool, string, int16, int32, int8, uint8, uint16, uint32:
		return x, nil
	case int64:
		if x > maxSafeInt || x < -maxSafeInt {
			return strconv.FormatInt(x, 10), nil
		}
		return x, nil
	case float32:
		if s, special := floatSpecial(float64(x)); special {
			return s, nil
		}
		return jsontext.Value(strconv.FormatFloat(float64(x), 'g', -1, 32)), nil
	case float64:
		if s, special := floatSpecial(x); special {
			return s, nil
		}
		return x, nil
	case []byte:
		return base64.StdEncoding.EncodeToString(x), nil
	case [16]byte:
		return uuidString(x), nil
	case time.Time:
		if oid == pgtype.DateOID || oid == pgtype.DateArrayOID {
			return x.Format("2006-01-02"), nil
		}
		if oid == pgtype.TimestampOID || oid == pgtype.TimestampArrayOID {
			return x.Format("2006-01-02T15:04:05.999999"), nil
		}
		return x.UTC().Format("2006-01-02T15:04:05.999999Z07:00"), nil
	case netip.Prefix:
		return x.String(), nil
	case netip.Addr:
		return x.String(), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			m, err := goValue(e, elemOID(oid))
			if err != nil {
				return nil, err
			}
			out[i] = m
		}
		return out, nil
	case map[string]any:
		// json and jsonb inside arrays: pgx decodes them with
		// encoding/json. Re-encoded as JSON; numbers beyond 2^53 inside
		// such arrays are the one documented precision limit.
		return x, nil
	case driver.Valuer:
		// pgtype values such as Numeric, Interval, Date, Timestamp in
		// arrays: their driver value is the exact text.
		dv, err := x.Value()
		if err != nil {
			return nil, err
		}
		switch d := dv.(type) {
		case nil:
			return nil, nil
		case string:
			return d, nil
		case time.Time:
			return goValue(d, elemOID(oid))
		case int64, float64, bool:
			return goValue(d, oid)
		case []byte:
			return string(d), nil
		}
		return fmt.Sprint(dv), nil
	case fmt.Stringer:
		return x.String(), nil
	}
	return nil, fmt.Errorf("sqlquery: no JSON mapping for %T", v)
}

func floatSpecial(f float64) (string, bool) {
	switch {
	case math.IsNaN(f):
		return "NaN", true
	case math.IsInf(f, 1):
		return "Infinity", true
	case math.IsInf(f, -1):
		return "-Infinity", true
	}
	return "", false
}

func uuidString(b [16]byte) string {
	var buf [36]byte
	hex.Encode(buf[0:8], b[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], b[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], b[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], b[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], b[10:])
	return string(buf[:])
}

// elemOID returns the element type of the array types whose element needs
// a specific format; other types map to themselves.
func elemOID(oid uint32) uint32 {
	switch oid {
	case pgtype.DateArrayOID:
		return pgtype.DateOID
	case pgtype.TimestampArrayOID:
		return pgtype.TimestampOID
	case pgtype.TimestamptzArrayOID:
		return pgtype.TimestamptzOID
	}
	return oid
}
