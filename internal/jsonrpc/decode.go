package jsonrpc

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxNesting is the deepest nesting of arrays and objects a frame may have.
// Tool arguments are held to a much smaller depth later; this bound only
// keeps hostile frames from costing parser stack.
const MaxNesting = 64

// maxPooledFrame is the largest frame after which a decoder is reused.
const maxPooledFrame = 64 << 10

// Item is one element of a decoded frame: a message or the error response
// owed for an invalid one.
type Item struct {
	Msg *Message
	Err *Error
}

// Frame is a decoded input frame.
type Frame struct {
	// Batch reports whether the frame was a JSON array.
	Batch bool
	// Items holds one element for a single message, one per member for a
	// batch.
	Items []Item
}

// decoder is a reusable strict decoder with its input.
type decoder struct {
	br bytes.Reader
	d  *jsontext.Decoder
}

var decoders = sync.Pool{New: func() any {
	dec := &decoder{}
	dec.d = jsontext.NewDecoder(&dec.br)
	return dec
}}

// DecodeFrame parses one input frame. A frame that is not strict JSON yields
// a single -32700 item without id; a well-formed frame that is not a valid
// request yields a -32600 item, with the id echoed only when it was itself
// valid. An empty batch is a single -32600.
func DecodeFrame(b []byte) Frame { return decodeFrame(b, false) }

// DecodeFrameResults is DecodeFrame for a client reading its peer's
// answers: a repeated member name inside a response's result does not
// make the frame invalid. The result is kept raw for its reader, which
// must parse it strictly, so that one bad element of a list (a tool
// descriptor with a repeated member) can be refused on its own instead
// of failing the whole page. Everywhere else — the envelope, params,
// error — a repeated name is the parse error it is for DecodeFrame.
func DecodeFrameResults(b []byte) Frame { return decodeFrame(b, true) }

func decodeFrame(b []byte, lenientResults bool) Frame {
	if !nestingWithin(b, MaxNesting) {
		return single(nil, parseError("nesting too deep"))
	}
	dec := decoders.Get().(*decoder)
	defer func() {
		dec.br.Reset(nil) // drop the reference to the frame
		// A decoder that read a large frame keeps a buffer of its size;
		// only small ones go back to the pool.
		if len(b) <= maxPooledFrame {
			decoders.Put(dec)
		}
	}()
	dec.br.Reset(b)
	d := dec.d
	// Reset also sets the options: DecodeFrameResults reads repeated names,
	// and decodeObject then keeps them out of all but a result.
	d.Reset(&dec.br, jsontext.AllowDuplicateNames(lenientResults))

	switch d.PeekKind() {
	case '{':
		msg, perr, verr := decodeObject(d, lenientResults)
		if perr != nil {
			return single(nil, perr)
		}
		if !atEOF(d) {
			return single(nil, parseError("trailing data after the message"))
		}
		return single(msg, verr)
	case '[':
		v, err := d.ReadValue()
		if err != nil {
			return single(nil, syntaxError(err))
		}
		v = v.Clone() // v aliases the decoder's buffer, which the next read reuses
		if !atEOF(d) {
			return single(nil, parseError("trailing data after the message"))
		}
		return decodeBatch(v, lenientResults)
	default:
		if _, err := d.ReadValue(); err != nil {
			return single(nil, syntaxError(err))
		}
		if !atEOF(d) {
			return single(nil, parseError("invalid JSON"))
		}
		return single(nil, invalid(ID{}, "a message must be a JSON object"))
	}
}

func single(m *Message, e *Error) Frame {
	return Frame{Items: []Item{{Msg: m, Err: e}}}
}

func parseError(why string) *Error {
	return &Error{Code: CodeParseError, Message: "Parse error: " + why}
}

// repeatedName is the parse error of an object that names a member
// twice: strict JSON here (RFC 8259 leaves it to the parser, and two
// parsers that keep different copies are a smuggling channel), and the
// one a peer cannot work out from "invalid JSON" alone.
func repeatedName() *Error {
	return parseError("a member name is repeated in an object (each name may appear once)")
}

// syntaxError is the parse error for a decoder error: a repeated member
// name says so, anything else is invalid JSON. Neither quotes the input.
func syntaxError(err error) *Error {
	if errors.Is(err, jsontext.ErrDuplicateName) {
		return repeatedName()
	}
	return parseError("invalid JSON")
}

func invalid(id ID, why string) *Error {
	return &Error{ID: id, Code: CodeInvalidRequest, Message: "Invalid request: " + why}
}

func atEOF(d *jsontext.Decoder) bool {
	_, err := d.ReadToken()
	return errors.Is(err, io.EOF)
}

func decodeBatch(v jsontext.Value, lenientResults bool) Frame {
	f := Frame{Batch: true}
	d := jsontext.NewDecoder(bytes.NewReader(v), jsontext.AllowDuplicateNames(lenientResults))
	if _, err := d.ReadToken(); err != nil { // '['
		return single(nil, parseError("invalid JSON"))
	}
	for d.PeekKind() != ']' {
		if d.PeekKind() != '{' {
			if err := d.SkipValue(); err != nil {
				return single(nil, parseError("invalid JSON"))
			}
			f.Items = append(f.Items, Item{Err: invalid(ID{}, "a message must be a JSON object")})
			continue
		}
		msg, perr, verr := decodeObject(d, lenientResults)
		if perr != nil {
			return single(nil, perr)
		}
		f.Items = append(f.Items, Item{Msg: msg, Err: verr})
	}
	if len(f.Items) == 0 {
		return single(nil, invalid(ID{}, "empty batch"))
	}
	return f
}

// member presence bits.
const (
	hasJSONRPC = 1 << iota
	hasID
	hasMethod
	hasParams
	hasResult
	hasError
)

// decodeObject reads one message object. perr is a parse error (the frame
// is not strict JSON); otherwise verr, if set, is the envelope violation
// found first. The whole object is always read, so a later syntax error
// still wins over an earlier envelope violation. With lenientResults the
// decoder d allows repeated names, and uniqueness is checked here for
// everything but the contents of "result".
func decodeObject(d *jsontext.Decoder, lenientResults bool) (msg *Message, perr, verr *Error) {
	if _, err := d.ReadToken(); err != nil {
		return nil, parseError("invalid JSON"), nil
	}
	var (
		m       Message
		seen    int
		why     string
		idValid = true
		rawID   []byte
		names   map[string]bool // with lenientResults
	)
	if lenientResults {
		names = map[string]bool{}
	}
	violate := func(s string) {
		if why == "" {
			why = s
		}
	}
	for {
		k := d.PeekKind()
		if k == '}' {
			break
		}
		if k == 0 { // syntax error or EOF inside the object
			_, err := d.ReadToken()
			return nil, syntaxError(err), nil
		}
		tok, err := d.ReadToken()
		if err != nil {
			return nil, syntaxError(err), nil
		}
		name := tok.String()
		val, err := d.ReadValue()
		if err != nil {
			return nil, syntaxError(err), nil
		}
		if lenientResults {
			if names[name] || (name != "result" && !val.IsValid()) {
				return nil, repeatedName(), nil // as the strict decoder says
			}
			names[name] = true
		}
		switch name {
		case "jsonrpc":
			seen |= hasJSONRPC
			if s, ok := stringValue(val); !ok || s != Version {
				violate(`"jsonrpc" must be "2.0"`)
			}
		case "id":
			seen |= hasID
			id, ok := ParseID(val)
			if !ok {
				idValid = false
				rawID = bytes.Clone(val)
				violate(`"id" must be a string or an integer`)
			}
			m.ID = id
		case "method":
			seen |= hasMethod
			s, ok := methodValue(val)
			if !ok {
				violate(`"method" must be a string`)
			}
			m.Method = s
		case "params":
			seen |= hasParams
			if val.Kind() != '{' {
				violate(`"params" must be an object`)
			}
			m.Params = bytes.Clone(val)
		case "result":
			seen |= hasResult
			m.Result = bytes.Clone(val)
		case "error":
			seen |= hasError
			if val.Kind() != '{' {
				violate(`"error" must be an object`)
			}
			m.Error = bytes.Clone(val)
		default:
			violate("unknown member " + strconv.Quote(truncate(name, 64)))
		}
	}
	if _, err := d.ReadToken(); err != nil { // '}'
		return nil, parseError("invalid JSON"), nil
	}
	if !idValid {
		m.ID = ID{}
	}
	switch {
	case seen&hasMethod != 0:
		if seen&(hasResult|hasError) != 0 {
			violate(`a request must not carry "result" or "error"`)
		}
		if seen&hasID != 0 {
			m.Kind = KindRequest
		} else {
			m.Kind = KindNotification
		}
	case seen&(hasResult|hasError) != 0:
		if seen&hasResult != 0 && seen&hasError != 0 {
			violate(`a response must not carry both "result" and "error"`)
		}
		if seen&hasID == 0 && seen&hasResult != 0 {
			violate(`a result must carry the id of its request`)
		}
		m.Kind = KindResponse
	default:
		violate(`missing "method"`)
	}
	if seen&hasJSONRPC == 0 {
		violate(`missing "jsonrpc"`)
	}
	if why != "" {
		e := invalid(m.ID, why)
		e.RawID = rawID
		notification := seen&hasMethod != 0 && seen&hasID == 0
		response := seen&hasMethod == 0 && seen&(hasResult|hasError) != 0
		e.NoReply = notification || response
		return nil, nil, e
	}
	return &m, nil, nil
}

func stringValue(v jsontext.Value) (string, bool) {
	if v.Kind() != '"' {
		return "", false
	}
	b, err := jsontext.AppendUnquote(nil, v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// knownMethods avoids an allocation per message for the common methods when
// they are written without escapes. Keys are the quoted JSON text.
var knownMethods = map[string]string{
	`"initialize"`:                "initialize",
	`"notifications/initialized"`: "notifications/initialized",
	`"notifications/cancelled"`:   "notifications/cancelled",
	`"ping"`:                      "ping",
	`"tools/list"`:                "tools/list",
	`"tools/call"`:                "tools/call",
	`"server/discover"`:           "server/discover",
}

func methodValue(v jsontext.Value) (string, bool) {
	if s, ok := knownMethods[string(v)]; ok {
		return s, true
	}
	return stringValue(v)
}

// ParseID reads a request id as the decoder does: a string, or an integer
// written without fraction, exponent or negative zero, within int64. A
// notifications/cancelled requestId is read with it, so that it names
// the same id its request did.
func ParseID(v jsontext.Value) (ID, bool) {
	switch v.Kind() {
	case '"':
		s, ok := stringValue(v)
		if !ok {
			return ID{}, false
		}
		return StringID(s), true
	case '0':
		s := string(v)
		if s == "-0" || bytes.ContainsAny(v, ".eE") {
			return ID{}, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return ID{}, false
		}
		return Int64ID(n), true
	}
	return ID{}, false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// nestingWithin reports whether the JSON text b nests arrays and objects at
// most limit deep. It tracks strings so brackets inside them do not count;
// it does not validate, the decoder does that.
func nestingWithin(b []byte, limit int) bool {
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > limit {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	return true
}
