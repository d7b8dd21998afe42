package admit

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/text/unicode/norm"
)

// Finding is one hit of the scanner: evidence for a reviewer, never a
// verdict on its own (decision 7). Text that merely mentions a password
// or says "important" is not a finding; text that tells the model to read
// one, or to hide what it does from the user, is.
type Finding struct {
	// Category is a stable identifier (see the Scan* constants).
	Category string `json:"category"`
	// Pointer is the JSON pointer of the string in the descriptor; for a
	// member name it is the member's pointer and Key is true.
	Pointer string `json:"pointer"`
	Key     bool   `json:"key,omitempty"`
	// Excerpt is a short, escaped piece of the text around the hit.
	Excerpt string `json:"excerpt"`
}

// Scanner categories.
const (
	ScanRoleTag             = "role_tag"
	ScanInstructionOverride = "instruction_override"
	ScanConcealment         = "concealment"
	ScanSecretAccess        = "secret_access"
	ScanObscuredDestination = "obscured_destination"
	ScanInvisibleUnicode    = "invisible_unicode"
	ScanToolReference       = "tool_reference"
)

// rule is one scanner pattern. quick holds lower-case words of which one
// must occur before the expression runs: most strings of most
// descriptors contain none, and a substring test is far cheaper than a
// regular expression (admitting 10,000 descriptors is benchmarked).
type rule struct {
	category string
	quick    []string
	re       *regexp.Regexp
}

var rules = []rule{
	{ScanRoleTag, []string{"<", "[inst", "system", "assistant"}, regexp.MustCompile(
		`(?i)<\s*/?\s*(system|assistant|user|human|instructions?|important|admin|developer|tool[_ ]call|im[_ ]start|im[_ ]end|context)\b[^>]{0,40}>` +
			`|<\|[a-z_ ]{2,20}\|>|\[/?inst\]|(?m)^\s*#{0,3}\s*(system|assistant)\s*:`)},
	{ScanInstructionOverride, []string{"ignore", "disregard", "forget", "override", "instead", "new instructions", "you must", "before using", "before calling"}, regexp.MustCompile(
		`(?i)\b(ignore|disregard|forget|override)\b[^.]{0,40}\b(previous|prior|above|earlier|all|any|other|system|user'?s?)\b[^.]{0,20}\b(instructions?|prompts?|rules?|directions?|guidelines?|messages?)\b` +
			`|\bnew instructions\b|\binstead of (what )?the user\b` +
			`|\b(before|after) (using|calling|invoking) (this|any|every|other|another)\b[^.]{0,40}\b(you must|always|first)\b` +
			`|\byou must (always |now |first )?(call|use|invoke|run|send|read)\b`)},
	{ScanConcealment, []string{"not tell", "n't tell", "not mention", "n't mention", "not inform", "never tell", "never mention", "never reveal", "without telling", "without informing", "secret from", "hidden from", "not reveal", "n't reveal", "not show", "not disclose", "should not know", "must not know", "not notify"}, regexp.MustCompile(
		`(?i)\b(do not|don't|never|must not|should not)\s+(tell|mention|inform|reveal|show|disclose|notify|alert)\b[^.]{0,40}\b(user|human|anyone|them|operator)\b` +
			`|\bwithout (telling|informing|notifying|alerting) (the )?(user|human|anyone)\b` +
			`|\b(secret|hidden) from (the )?(user|human)\b|\b(user|human) (should|must) not (know|see|notice)\b`)},
	{ScanSecretAccess, []string{".ssh", "id_rsa", "id rsa", "id_ed25519", "id ed25519", ".aws", ".env", "/etc/", ".netrc", ".npmrc", ".pgpass", "mcp.json", "claude_desktop", "claude desktop", "private key", "credential", "password", "secret", "token", "api key", "api_key", "apikey"}, regexp.MustCompile(
		`(?i)~?/?\.ssh\b|\bid[_ ](rsa|ed25519|ecdsa)\b|\.aws/credentials|(^|[\s/"'\x60(\[])\.env\b|/etc/(passwd|shadow)|\.netrc\b|\.npmrc\b|\.pgpass\b|\bmcp\.json\b|claude[_ ]desktop[_ ]config` +
			`|\b(read|send|include|pass|exfiltrate|upload|leak|copy|forward|attach|append|post|collect|extract)\b[^.]{0,40}\b(private keys?|api[ _-]?keys?|credentials|passwords?|secrets?|access tokens?|tokens|ssh keys?|environment variables)\b`)},
	{ScanObscuredDestination, []string{"://", "data:", "xn--", "//"}, regexp.MustCompile(
		`(?i)\b[a-z][a-z0-9+.-]*://(` +
			`[^/\s"'@]*@` + // credentials or a misleading host before @
			`|\[[0-9a-f:.]+\]` + // an IPv6 literal
			`|\d{1,3}(\.\d{1,3}){1,3}\b` + // an IPv4 literal, short forms (127.1) too
			`|0x[0-9a-f]+\b|\d{8,10}\b` + // a numeric host
			`|[^/\s"']*%[0-9a-f]{2}` + // a percent-encoded host
			`|[^/\s"']*xn--` + // punycode
			`|[^/\s"'@]*[^\x00-\x7f]` + // a host with non-ASCII letters (homoglyphs)
			`)|\bdata:[a-z]+/[a-z0-9.+-]+[;,]` + // any data: URI
			`|(^|[\s"'(<])//(\d{1,3}(\.\d{1,3}){1,3}|\[[0-9a-f:.]+\])`)}, // a scheme-relative IP literal
}

// longBase64 is an encoded blob: a destination or an instruction the
// reviewer cannot read.
var longBase64 = regexp.MustCompile(`[A-Za-z0-9+/_-]{48,}={0,2}`)

// Scan reads every string of a descriptor — member names, values, at any
// depth, _meta and annotations included — and returns the findings,
// ordered by pointer. others are the names of the other configured
// servers: a descriptor that names one of their tools is steering the
// model across servers. raw must be valid JSON.
func Scan(raw jsontext.Value, others []string) []Finding {
	tree, err := decodeTree(raw)
	if err != nil {
		return nil
	}
	return scanTree(tree, others)
}

// scanTree is Scan of a decoded descriptor.
func scanTree(tree any, others []string) []Finding {
	var out []Finding
	scanValue(tree, "", toolReference(others), &out)
	// Members are visited in map order, and the findings (rarely more
	// than a few) sorted after: sorting every object's names costs more
	// than the scan.
	slices.SortStableFunc(out, func(a, b Finding) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		switch {
		case a.Key && !b.Key:
			return -1
		case b.Key && !a.Key:
			return 1
		}
		return 0
	})
	return out
}

// toolReference matches a qualified name of another server's tool. Names
// that are not valid UTF-8 (configured names never are) are cleaned
// rather than allowed to break the expression.
func toolReference(others []string) *regexp.Regexp {
	if len(others) == 0 {
		return nil
	}
	quoted := make([]string, len(others))
	for i, o := range others {
		quoted[i] = regexp.QuoteMeta(strings.ToValidUTF8(o, "\uFFFD"))
	}
	return regexp.MustCompile(`(?i)\b(` + strings.Join(quoted, "|") + `)\.[A-Za-z0-9_][A-Za-z0-9_.-]*`)
}

func scanValue(v any, pointer string, refs *regexp.Regexp, out *[]Finding) {
	switch v := v.(type) {
	case string:
		scanString(v, pointer, false, refs, out)
	case []any:
		for i, it := range v {
			scanValue(it, pointer+"/"+strconv.Itoa(i), refs, out)
		}
	case map[string]any:
		for k, child := range v {
			p := pointer + "/" + escape(k)
			scanString(k, p, true, refs, out)
			scanValue(child, p, refs, out)
		}
	}
}

// schemaWords are member names of JSON Schema and of MCP descriptors:
// a member name that is exactly one of them says nothing a reviewer must
// read, and skipping it keeps a 10,000-tool admission fast. Property
// names, and every value, are always read.
var schemaWords = map[string]bool{
	"name": true, "title": true, "description": true, "inputSchema": true, "outputSchema": true, "annotations": true,
	"icons": true, "_meta": true, "type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "default": true, "minimum": true, "maximum": true, "minLength": true,
	"maxLength": true, "pattern": true, "format": true, "$schema": true, "$ref": true, "$defs": true, "$id": true,
	"oneOf": true, "anyOf": true, "allOf": true, "not": true, "readOnlyHint": true, "destructiveHint": true,
	"idempotentHint": true, "openWorldHint": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minItems": true, "maxItems": true, "uniqueItems": true, "examples": true, "x-mcp-header": true,
}

func scanString(s, pointer string, key bool, refs *regexp.Regexp, out *[]Finding) {
	if key && schemaWords[s] {
		return
	}
	if at, end, ok := invisible(s); ok {
		*out = append(*out, Finding{Category: ScanInvisibleUnicode, Pointer: pointer, Key: key, Excerpt: excerpt(s, at, end)})
	}
	if len(s) < 3 {
		return // too short to hold anything but an invisible character
	}
	// The rules read the text as a model would: invisible characters
	// gone, HTML entities decoded, compatibility forms folded (a
	// fullwidth ＜ is <), typographic quotes straight, every run of
	// spaces one space, every line break a newline, and _ a space (member
	// names are snake_case). Excerpts show that normalized text.
	n := normalizeText(s)
	add := func(category string, at, end int) {
		*out = append(*out, Finding{Category: category, Pointer: pointer, Key: key, Excerpt: excerpt(n, at, end)})
	}
	lower := strings.ToLower(n)
	for _, r := range rules {
		if !containsAny(lower, r.quick) {
			continue
		}
		if loc := r.re.FindStringIndex(n); loc != nil {
			add(r.category, loc[0], loc[1])
		}
	}
	if len(s) >= 48 {
		if loc := longBase64.FindStringIndex(s); loc != nil && looksEncoded(s[loc[0]:loc[1]]) {
			*out = append(*out, Finding{Category: ScanObscuredDestination, Pointer: pointer, Key: key, Excerpt: excerpt(s, loc[0], loc[1])})
		}
	}
	if refs != nil && strings.Contains(s, ".") {
		if loc := refs.FindStringIndex(s); loc != nil {
			*out = append(*out, Finding{Category: ScanToolReference, Pointer: pointer, Key: key, Excerpt: excerpt(s, loc[0], loc[1])})
		}
	}
}

// normalizeText is the text the rules read (see scanString).
func normalizeText(s string) string {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 0x20 && c < 0x7f && c != '&' && c != '_' && !(c == ' ' && i+1 < len(s) && s[i+1] == ' ')
	}
	if plain {
		return s // the common case: nothing to fold
	}
	if strings.IndexByte(s, '&') >= 0 {
		s = html.UnescapeString(s)
	}
	s = norm.NFKC.String(s)
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == 0x2028 || r == 0x2029 || r == 0x85:
			b.WriteByte('\n')
			space = false
			continue
		case invisibleRune(r):
			continue
		case r == '_' || unicode.IsSpace(r):
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		case r == 0x2018 || r == 0x2019 || r == 0x201B || r == 0x2032:
			r = '\''
		case r == 0x201C || r == 0x201D || r == 0x201E || r == 0x2033:
			r = '"'
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// looksEncoded tells a base64 blob from a long identifier: it mixes
// cases and digits.
func looksEncoded(s string) bool {
	var upper, lower, digit bool
	for _, c := range s {
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= '0' && c <= '9':
			digit = true
		}
	}
	return upper && lower && digit
}

// invisible finds a character a reviewer reading the text would not see
// (see invisibleRune).
func invisible(s string) (int, int, bool) {
	var prev rune
	for i, r := range s {
		if invisibleRune(r) && !emojiJoiner(prev, r) {
			return i, i + utf8.RuneLen(r), true
		}
		prev = r
	}
	return 0, 0, false
}

// invisibleRune reports a character that renders as nothing: every
// format character (Cf: bidirectional controls, zero-width characters,
// Unicode tag characters, which can spell a whole hidden instruction),
// variation selectors (the supplementary ones can carry a byte each),
// line and paragraph separators, and the blank letters (the combining
// grapheme joiner, Hangul fillers, the Braille blank).
func invisibleRune(r rune) bool {
	switch {
	case r < 0x80:
		return false
	case unicode.Is(unicode.Cf, r),
		r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF, r >= 0x180B && r <= 0x180F,
		r == 0x034F, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0, r == 0x17B4, r == 0x17B5,
		r == 0x2028, r == 0x2029, r == 0x2800:
		return true
	}
	return false
}

// emojiJoiner tells the zero-width joiner and the emoji presentation
// selector after a symbol ("❤️", "👩‍💻") — ordinary emoji, not hidden text —
// from the same characters anywhere else.
func emojiJoiner(prev, r rune) bool {
	return (r == 0x200D || r == 0xFE0F) && prev != 0 && (unicode.Is(unicode.So, prev) || unicode.Is(unicode.Sk, prev) || prev == 0xFE0F)
}

// excerpt is up to 40 bytes either side of s[at:end] (160 at most, cut
// at character boundaries), with every character outside printable ASCII
// — and the backslash — escaped so that the reviewer sees what is there.
func excerpt(s string, at, end int) string {
	const side = 40
	from, to := max(at-side, 0), min(end+side, len(s))
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to++
	}
	if to-from > 160 {
		to = from + 160
		for to > from && !utf8.RuneStart(s[to]) {
			to--
		}
	}
	var b bytes.Buffer
	if from > 0 {
		b.WriteString("…")
	}
	for _, r := range s[from:to] {
		if r == '\\' {
			// Escaped itself, so that text spelling "\u202e" never reads
			// like the character an escape stands for.
			b.WriteString(`\\`)
			continue
		}
		if r >= 0x20 && r < 0x7F {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	if to < len(s) {
		b.WriteString("…")
	}
	return b.String()
}

// EscapeInvisible rewrites every invisible character (see invisibleRune)
// in JSON text as its \u escape, so that a reviewer reading a descriptor
// sees what the scanner saw. b must be JSON whose only non-ASCII
// characters are inside strings, as an encoder writes it.
func EscapeInvisible(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r < 0x80 || !invisibleRune(r) {
			if out != nil {
				out = append(out, b[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	if out == nil {
		return b
	}
	return out
}
