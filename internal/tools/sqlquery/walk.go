package sqlquery

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// children lists, for one pg_query message type, the message-typed fields
// a walk follows, in declaration order, and its oneofs. It is derived from
// the protobuf descriptors, so a field a new parser version adds is
// followed without anyone listing it. The order is fixed on purpose:
// protoreflect's Range order varies between builds, and the first
// violation found is the one reported.
type children struct {
	fields []protoreflect.FieldDescriptor
	oneofs []protoreflect.OneofDescriptor
	// byNumber describes every field for sameEncoding, indexed by field
	// number (pg_query numbers its fields from 1 without gaps).
	byNumber []wireShape
}

// wireShape is what sameEncoding needs to know of one field.
type wireShape struct {
	// msg is the type of a message field, nil for any other.
	msg protoreflect.MessageDescriptor
	// location marks a byte offset into the query text.
	location bool
}

// shapes maps every pg_query message to its children. It is built once
// and never changed.
var shapes = buildShapes(make(map[protoreflect.MessageDescriptor]*children), pg.File_pg_query_proto.Messages())

// buildShapes adds msgs, and the messages declared inside them, to out.
func buildShapes(out map[protoreflect.MessageDescriptor]*children, msgs protoreflect.MessageDescriptors) map[protoreflect.MessageDescriptor]*children {
	for i := range msgs.Len() {
		md := msgs.Get(i)
		buildShapes(out, md.Messages())
		c := &children{}
		fields := md.Fields()
		for j := range fields.Len() {
			fd := fields.Get(j)
			if fd.ContainingOneof() == nil && fd.Message() != nil {
				c.fields = append(c.fields, fd)
			}
			if n := int(fd.Number()); n < 1<<16 {
				for len(c.byNumber) <= n {
					c.byNumber = append(c.byNumber, wireShape{})
				}
				c.byNumber[n] = wireShape{msg: fd.Message(), location: isLocation(fd)}
			}
		}
		oneofs := md.Oneofs()
		for j := range oneofs.Len() {
			c.oneofs = append(c.oneofs, oneofs.Get(j))
		}
		out[md] = c
	}
	return out
}

// field describes field number n of the message, or reports false for a
// number the descriptor does not know.
func (c *children) field(n protowire.Number) (wireShape, bool) {
	if n < 1 || int(n) >= len(c.byNumber) {
		return wireShape{}, false
	}
	return c.byNumber[n], true
}

// walker is one walk of a parse tree: the policy it judges by and the
// functions it found for the catalog to vet.
type walker struct {
	p     *Policy
	funcs []FuncRef
}

// walk judges m and, depth first, every message below it: every set
// field, every element of every list, the set member of every oneof.
// depth is m's nesting level, counting every message (set operations nest
// through typed fields without Node wrappers).
func (w *walker) walk(m protoreflect.Message, depth int) *problem.Problem {
	if depth > MaxDepth {
		return violation(fmt.Sprintf("query is nested more than %d levels deep", MaxDepth))
	}
	if prob := w.judge(m); prob != nil {
		return prob
	}
	c := shapes[m.Descriptor()]
	if c == nil {
		// judge allows only pg_query messages, so this is unreachable
		// unless the two disagree; refuse rather than skip a subtree.
		return violation(fmt.Sprintf("syntax element %s is not allowed", m.Descriptor().Name()))
	}
	for _, fd := range c.fields {
		switch {
		case fd.IsMap():
			// pg_query has no map fields; one would come from a
			// parser this code was not written for.
			return violation(fmt.Sprintf("syntax element %s is not allowed", fd.FullName()))
		case fd.IsList():
			l := m.Get(fd).List()
			for i := range l.Len() {
				if prob := w.walk(l.Get(i).Message(), depth+1); prob != nil {
					return prob
				}
			}
		case m.Has(fd):
			if prob := w.walk(m.Get(fd).Message(), depth+1); prob != nil {
				return prob
			}
		}
	}
	for _, od := range c.oneofs {
		child, prob := oneofChild(m, od)
		if prob != nil {
			return prob
		}
		if child != nil {
			if prob := w.walk(child, depth+1); prob != nil {
				return prob
			}
		}
	}
	return nil
}

// oneofChild returns the message set in the oneof od of m, or nil when
// none or a scalar is set. A Node, the wrapper around nearly every value
// in the tree, is read through its Go type: protoreflect finds the set
// member of Node's 271-way oneof by reflection on every call, which cost
// a fifth of the walk. Every member of that oneof is a message; one that
// is not would come from a parser this code was not written for and is
// refused.
func oneofChild(m protoreflect.Message, od protoreflect.OneofDescriptor) (protoreflect.Message, *problem.Problem) {
	if n, ok := m.Interface().(*pg.Node); ok {
		w := n.GetNode()
		if w == nil {
			return nil, nil
		}
		inner, ok := reflect.ValueOf(w).Elem().Field(0).Interface().(proto.Message)
		if !ok {
			return nil, violation(fmt.Sprintf("syntax element %T is not allowed", w))
		}
		return inner.ProtoReflect(), nil
	}
	if fd := m.WhichOneof(od); fd != nil && fd.Message() != nil {
		return m.Get(fd).Message(), nil
	}
	return nil, nil
}

// judge decides one node on its own; walk takes care of its children.
// Kinds are allowed by name: everything the raw parser produces for a
// SELECT is listed, and anything else — statements, utility options,
// analysed-tree nodes, kinds added by a later parser — is refused.
func (w *walker) judge(m protoreflect.Message) *problem.Problem {
	switch n := m.Interface().(type) {
	case *pg.FuncCall:
		return w.judgeFunction(n.GetFuncname())
	case *pg.RangeTableSample:
		// The sampling method is a function (the handler of the method).
		return w.judgeFunction(n.GetMethod())
	case *pg.ColumnRef:
		// c.f is f(c) when c has no column f (attribute notation).
		if fields := n.GetFields(); len(fields) > 1 {
			w.attribute(fields[len(fields)-1])
		}
		return nil
	case *pg.A_Indirection:
		// (c).f likewise.
		for _, ind := range n.GetIndirection() {
			w.attribute(ind)
		}
		return nil
	case *pg.JsonFuncExpr, *pg.JsonScalarExpr, *pg.JsonSerializeExpr, *pg.JsonParseExpr,
		*pg.JsonArrayConstructor, *pg.JsonArrayQueryConstructor, *pg.JsonObjectConstructor,
		*pg.JsonArrayAgg, *pg.JsonObjectAgg:
		// SQL/JSON syntax of PostgreSQL 16 and 17. The regenerated text
		// spells it JSON_SCALAR(1), JSON_ARRAY(…): to an older server that
		// is an ordinary call, looked up by name on the search_path, so
		// the name goes to the catalog check like any other.
		w.note(FuncRef{Name: sqlJSONFunction(n)})
		return nil
	case *pg.ParamRef:
		return violation(fmt.Sprintf("bind parameter $%d is not allowed; write the value as a literal", n.GetNumber()))
	case *pg.IntoClause:
		return violation("SELECT INTO is not allowed")
	case *pg.LockingClause:
		return violation(fmt.Sprintf("locking clause %s is not allowed", lockStrength(n.GetStrength())))

	case *pg.Node, *pg.SelectStmt, *pg.RawStmt, *pg.List,
		// Literals and names.
		*pg.A_Const, *pg.Integer, *pg.Float, *pg.Boolean, *pg.String, *pg.BitString,
		*pg.A_Star, *pg.Alias, *pg.RangeVar, *pg.TypeName, *pg.ColumnDef,
		// Expressions.
		*pg.A_Expr, *pg.BoolExpr, *pg.NullTest, *pg.BooleanTest, *pg.TypeCast,
		*pg.CollateClause, *pg.A_Indices, *pg.A_ArrayExpr,
		*pg.RowExpr, *pg.SubLink, *pg.CaseExpr, *pg.CaseWhen, *pg.CoalesceExpr,
		*pg.MinMaxExpr, *pg.SQLValueFunction, *pg.NamedArgExpr, *pg.GroupingFunc,
		*pg.XmlExpr, *pg.XmlSerialize,
		// Query structure.
		*pg.ResTarget, *pg.SortBy, *pg.WindowDef, *pg.GroupingSet, *pg.WithClause,
		*pg.CommonTableExpr, *pg.CTESearchClause, *pg.CTECycleClause,
		*pg.JoinExpr, *pg.RangeSubselect, *pg.RangeFunction, *pg.RangeTableFunc,
		*pg.RangeTableFuncCol,
		// SQL/JSON.
		*pg.JsonFormat, *pg.JsonReturning, *pg.JsonValueExpr, *pg.JsonIsPredicate,
		*pg.JsonBehavior, *pg.JsonOutput, *pg.JsonArgument,
		*pg.JsonTablePathSpec, *pg.JsonTable, *pg.JsonTableColumn, *pg.JsonKeyValue,
		*pg.JsonAggConstructor:
		return nil
	}
	name := string(m.Descriptor().Name())
	if strings.HasSuffix(name, "Stmt") {
		return violation(fmt.Sprintf("statement type %s is not allowed", name))
	}
	return violation(fmt.Sprintf("syntax element %s is not allowed", name))
}

// judgeFunction decides a function by the last component of its resolved
// name. The parser has already folded unquoted identifiers to lower case
// and decoded U&"" escapes; quoted names stay as written, exactly as
// PostgreSQL would look them up. The schema is ignored on purpose: a
// denied name is refused in pg_catalog, public or any other schema. A
// function that passes is noted for the catalog check, whatever its
// schema: an extension can install functions in pg_catalog too.
func (w *walker) judgeFunction(nameParts []*pg.Node) *problem.Problem {
	p := w.p
	parts := make([]string, 0, len(nameParts))
	for _, n := range nameParts {
		s, ok := n.GetNode().(*pg.Node_String_)
		if !ok {
			return violation("function with a computed name is not allowed")
		}
		parts = append(parts, s.String_.GetSval())
	}
	if len(parts) == 0 {
		return violation("function without a name is not allowed")
	}
	last := parts[len(parts)-1]
	if _, denied := p.denied(last); denied {
		return violation(fmt.Sprintf("function %s is not allowed", displayName(parts)))
	}
	if p.allow != nil {
		if _, ok := p.allow[last]; !ok {
			return violation(fmt.Sprintf("function %s is not on the allowlist", displayName(parts)))
		}
	}
	ref := FuncRef{Name: last}
	if len(parts) > 1 {
		// catalog.schema.name: PostgreSQL refuses a catalog other than
		// the current database's, so the schema is what matters.
		ref.Schema = parts[len(parts)-2]
	}
	w.note(ref)
	return nil
}

// sqlJSONFunction is the function name an SQL/JSON construct reads as
// where the server does not know the syntax.
func sqlJSONFunction(n any) string {
	switch n := n.(type) {
	case *pg.JsonFuncExpr:
		switch n.GetOp() {
		case pg.JsonExprOp_JSON_EXISTS_OP:
			return "json_exists"
		case pg.JsonExprOp_JSON_QUERY_OP:
			return "json_query"
		case pg.JsonExprOp_JSON_VALUE_OP:
			return "json_value"
		}
		return "json_table"
	case *pg.JsonScalarExpr:
		return "json_scalar"
	case *pg.JsonSerializeExpr:
		return "json_serialize"
	case *pg.JsonParseExpr:
		return "json"
	case *pg.JsonArrayConstructor, *pg.JsonArrayQueryConstructor:
		return "json_array"
	case *pg.JsonObjectConstructor:
		return "json_object"
	case *pg.JsonArrayAgg:
		return "json_arrayagg"
	}
	return "json_objectagg"
}

// attribute notes the name n as a possible call through attribute
// notation. A star or a subscript is not a name. The policy judges the
// name as it judges a call, but cannot refuse it here: c.f is as likely a
// column. The catalog check refuses a name the policy refuses when a
// function of that name could be called this way, so (0.5).pg_sleep or
// (a.pid).pg_terminate_backend never runs.
func (w *walker) attribute(n *pg.Node) {
	s, ok := n.GetNode().(*pg.Node_String_)
	if !ok {
		return
	}
	ref := FuncRef{Name: s.String_.GetSval(), Attribute: true}
	if _, denied := w.p.denied(ref.Name); denied {
		ref.Refused = "is not allowed"
	} else if _, allowed := w.p.allow[ref.Name]; w.p.allow != nil && !allowed {
		ref.Refused = "is not on the allowlist"
	}
	w.note(ref)
}

// note adds ref to the functions to vet, once.
func (w *walker) note(ref FuncRef) {
	if !slices.Contains(w.funcs, ref) {
		w.funcs = append(w.funcs, ref)
	}
}

// denied returns the first rule that refuses the function name.
func (p *Policy) denied(name string) (denyRule, bool) {
	for _, r := range p.deny {
		if globMatch(r.Pattern, name) {
			return r, true
		}
	}
	return denyRule{}, false
}

// displayName writes a qualified name for a problem detail: plain
// identifiers as they are, anything else quoted and capped, since it is
// caller text.
func displayName(parts []string) string {
	out := make([]string, len(parts))
	for i, s := range parts {
		if plainIdentifier(s) {
			out[i] = s
		} else {
			out[i] = problem.Quote(s)
		}
	}
	return strings.Join(out, ".")
}

// plainIdentifier reports whether s would print the same unquoted: lower
// case letters, digits, '_' and '$', not starting with a digit or '$'.
func plainIdentifier(s string) bool {
	if s == "" || s[0] == '$' || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '$') {
			return false
		}
	}
	return true
}

// lockStrength names a row-locking clause as SQL writes it.
func lockStrength(s pg.LockClauseStrength) string {
	switch s {
	case pg.LockClauseStrength_LCS_FORKEYSHARE:
		return "FOR KEY SHARE"
	case pg.LockClauseStrength_LCS_FORSHARE:
		return "FOR SHARE"
	case pg.LockClauseStrength_LCS_FORNOKEYUPDATE:
		return "FOR NO KEY UPDATE"
	default:
		return "FOR UPDATE"
	}
}

// nodeName is the message name of the kind a Node wraps, e.g. DeleteStmt.
func nodeName(n *pg.Node) string {
	m := n.ProtoReflect()
	for _, od := range shapes[m.Descriptor()].oneofs {
		if fd := m.WhichOneof(od); fd != nil && fd.Message() != nil {
			return string(fd.Message().Name())
		}
	}
	return "(empty)"
}

// sameEncoding reports whether a and b, written by encode from messages of
// type md, hold the same parse tree once byte offsets into the text are set
// aside. It reads the wire format guided by the descriptors: every field is
// compared, a message field recursively and any other byte for byte, and
// location fields are skipped on both sides. Both sides come from the same
// deterministic marshaller, which writes the fields of a message in a fixed
// order, so equal trees give equal fields in equal order. This costs a
// fraction of walking both trees with protoreflect, and the encoding of
// the checked tree is needed for the deparser anyway.
func sameEncoding(md protoreflect.MessageDescriptor, a, b []byte) bool {
	c := shapes[md]
	if c == nil {
		return false
	}
	for {
		a, b = c.skipLocations(a), c.skipLocations(b)
		if len(a) == 0 || len(b) == 0 {
			return len(a) == len(b)
		}
		num, typ, n := protowire.ConsumeTag(a)
		if n < 0 || n > len(b) || !bytes.Equal(a[:n], b[:n]) {
			return false
		}
		a, b = a[n:], b[n:]
		if ws, _ := c.field(num); ws.msg != nil && typ == protowire.BytesType {
			va, na := protowire.ConsumeBytes(a)
			vb, nb := protowire.ConsumeBytes(b)
			if na < 0 || nb < 0 || !sameEncoding(ws.msg, va, vb) {
				return false
			}
			a, b = a[na:], b[nb:]
			continue
		}
		na := protowire.ConsumeFieldValue(num, typ, a)
		nb := protowire.ConsumeFieldValue(num, typ, b)
		if na < 0 || na != nb || !bytes.Equal(a[:na], b[:nb]) {
			return false
		}
		a, b = a[na:], b[nb:]
	}
}

// skipLocations returns b, an encoded message of c's type, without the
// location fields it starts with. Malformed input is returned as it is,
// for the caller to refuse.
func (c *children) skipLocations(b []byte) []byte {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return b
		}
		if ws, _ := c.field(num); !ws.location {
			return b
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return b
		}
		b = b[n+m:]
	}
	return b
}

// encode writes tree in the wire format the deparser reads. Determinism
// makes two encodings of one tree byte-identical, which sameEncoding
// relies on.
func encode(tree *pg.ParseResult) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(tree)
}

// isLocation reports whether fd holds a byte offset into the query text,
// which differs between a query and its deparsed form by design.
func isLocation(fd protoreflect.FieldDescriptor) bool {
	switch fd.Name() {
	case "location", "stmt_location", "stmt_len":
		return true
	}
	return false
}
