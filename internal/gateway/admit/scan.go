package admit

import (
	"bytes"
	"fmt"
	"html"
	"iter"
	"regexp"
	"regexp/syntax"
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
	ScanMixedScript         = "mixed_script"
	ScanOversizedText       = "oversized_text"
)

// maxScanned is how much of one string the rules read (invisible
// characters are looked for in all of it).
const maxScanned = 64 << 10

// rule is one scanner pattern. quick holds lower-case strings of which
// one must occur before the expression runs: most strings of most
// descriptors contain none, and a substring test is far cheaper than a
// regular expression (admitting 10,000 descriptors is benchmarked). quick
// is derived from the expression (see required), never written beside
// it: a word list kept by hand drifts from the expression it guards, and
// every phrasing it forgets is one the expression never reads.
type rule struct {
	category string
	quick    []string
	re       *regexp.Regexp
}

// newRule compiles expr, with its prefilter.
func newRule(category, expr string) rule {
	re := regexp.MustCompile(expr)
	// regexp.Compile parses with syntax.Perl: the same tree.
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		panic(err)
	}
	return rule{category: category, quick: required(tree.Simplify()), re: re}
}

var rules = []rule{
	newRule(ScanRoleTag,
		`(?i)<\s*/?\s*(system|assistant|user|human|instructions?|important|admin|developer|tool[_ ]call|im[_ ]start|im[_ ]end|context)\b[^>]{0,40}>`+
			`|<\|[a-z_ ]{2,20}\|>|\[/?(inst|system)\]|<<\s*/?sys\s*>>|</?(start|end)[_ ]of[_ ]turn>|(?m)^\s*#{0,3}\s*(system|assistant)\s*:`),
	newRule(ScanInstructionOverride,
		`(?i)\b(ignore|disregard|forget|override)\b[^.]{0,40}\b(previous|prior|above|earlier|all|any|other|system|user'?s?)\b[^.]{0,20}\b(instructions?|prompts?|rules?|directions?|guidelines?|messages?)\b`+
			`|\bnew instructions\b|\binstead of (what )?the user\b`+
			`|\b(before|after) (using|calling|invoking) (this|any|every|other|another)\b[^.]{0,40}\b(you must|always|first)\b`+
			`|\byou must (always |now |first )?(call|use|invoke|run|send|read)\b`),
	newRule(ScanConcealment,
		`(?i)\b(do not|don't|never|must not|should not)\s+(tell|mention|inform|reveal|show|disclose|notify|alert)\b[^.]{0,40}\b(user|human|anyone|them|operator)\b`+
			`|\bwithout (telling|informing|notifying|alerting) (the )?(user|human|anyone)\b`+
			`|\b(secret|hidden) from (the )?(user|human)\b|\b(user|human) (should|must) not (know|see|notice)\b`),
	// Hidden markup: text a rendered view hides from the reviewer while
	// the model reads it. HTML comments and the other markup a browser
	// drops (declarations, CDATA); markdown comment idioms and titles of
	// link reference definitions, which render as nothing; the hidden
	// attribute; inline styles that hide; elements a browser does not
	// render (template, script, style, noscript), when closed, so that a
	// text naming a <script> tag is not hidden markup. The styles are only
	// those that hide outright, in a style attribute: a text about CSS is
	// not hidden. They hide by display, visibility or colour, by a size
	// of zero (a box of zero height or width only with overflow hidden),
	// by a clip to nothing, or by moving the text far off the page.
	newRule(ScanConcealment,
		`(?i)<!(--|\[cdata\[|[a-z])`+
			`|(?m:^[ >]*\[[^\]\n]{1,100}\]: ?(<>|<#>|#|//)( |$))`+
			`|(?m:^[ >]*\[[^\]\n]{1,100}\]: ?<?[^ \n>]+>? ("[^"\n]*"|'[^'\n]*'|\([^)\n]*\)))`+
			`|(?m:^[ >]*\[[^\]\n]{1,100}\]: ?<[^>\n]* [^>\n]*>)`+ // a definition whose <target> is words
			`|<[a-z][a-z0-9-]*( [^>]{0,200})? hidden( ?[=/>]| |$)`+
			`|(?s:<(template|script|style|noscript)\b[^>]{0,200}>.*?</(template|script|style|noscript)\b)`+
			// A property counts where one begins: after the quote, a
			// semicolon, white space or a comment ("min-width" is not
			// "width").
			`|\bstyle ?= ?["']?([^"'>]{0,200}?[;\s/])?(display ?: ?none|visibility ?: ?(hidden|collapse)`+
			`|color ?: ?(transparent|rgba ?\( ?[0-9]+ ?, ?[0-9]+ ?, ?[0-9]+ ?, ?0?\.?0* ?\))`+
			`|(font-size|opacity) ?: ?[0.]+(px|em|rem|pt|%)? ?([;"'!>}]|$)|filter ?: ?opacity ?\( ?[0.]+%? ?\)`+
			`|transform ?: ?(scale[xy]? ?\( ?[0.]+ ?[,)]|translate[xy]? ?\( ?-[0-9]{4,})`+
			`|(max-)?(height|width) ?: ?[0.]+(px|em|rem|pt|%)?( ?!important)? ?;([^"'>]{0,200}[;\s/])?overflow(-[xy])? ?: ?(hidden|clip)`+
			`|overflow(-[xy])? ?: ?(hidden|clip)( ?!important)? ?;([^"'>]{0,200}[;\s/])?(max-)?(height|width) ?: ?[0.]+(px|em|rem|pt|%)? ?([;"'!>}]|$)`+
			`|clip ?: ?rect ?\( ?0(px)?[ ,]+0(px)?[ ,]+0(px)?[ ,]+0|clip-path ?: ?(inset ?\( ?(100%|(50|100)%( +(50|100)%){0,3} ?\))|circle ?\( ?0)`+
			`|(left|top|right|bottom|text-indent) ?: ?-[0-9]{3,}|margin-(left|top) ?: ?-[0-9]{4,})`),
	newRule(ScanSecretAccess,
		`(?i)~?/?\.ssh\b|\bid[_ ](rsa|ed25519|ecdsa)\b|\.aws/credentials|(^|[\s/"'\x60(\[])\.env\b|/etc/(passwd|shadow)|\.netrc\b|\.npmrc\b|\.pgpass\b|\bmcp\.json\b|claude[_ ]desktop[_ ]config`+
			`|\.docker/config\.json|\.kube/config\b|\.git-credentials\b|\.gnupg\b|\.(bash|zsh)[_ ]history\b|\.config/gh/hosts`+
			`|\b(read|send|include|pass|exfiltrate|upload|leak|copy|forward|attach|append|post|collect|extract)\b[^.]{0,40}\b(private keys?|api[ _-]?keys?|credentials|passwords?|secrets?|access tokens?|tokens|ssh keys?|environment variables)\b`),
	newRule(ScanObscuredDestination,
		`(?i)\b[a-z][a-z0-9+.-]*://(`+
			`[^/\s"'@]*@`+ // credentials or a misleading host before @
			`|\[[0-9a-f:.]+\]`+ // an IPv6 literal
			`|(0x[0-9a-f]+|\d+)(\.(0x[0-9a-f]+|\d+)){0,3}\b`+ // a numeric host: dotted, short (127.1), octal, hex or one number
			`|[^/\s"']*%[0-9a-f]{2}`+ // a percent-encoded host
			`|[^/\s"']*xn--`+ // punycode
			`|[^/\s"'@]*[^\x00-\x7f]`+ // a host with non-ASCII letters (homoglyphs)
			`)|\bdata:[a-z]+/[a-z0-9.+-]+[;,]`+ // any data: URI
			`|(^|[\s"'(<])//((0x[0-9a-f]+|\d+)(\.(0x[0-9a-f]+|\d+)){1,3}|\[[0-9a-f:.]+\])`), // a scheme-relative IP literal
}

// required returns strings, in lower case, of which every match of re
// contains at least one; nil when there is no such set (the expression
// must then always run). It is sound, not complete: a literal, or a
// concatenation's most selective part, or every branch of an alternation
// (each must have a set). Matching is case-insensitive, and the text is
// lower-cased with strings.ToLower before the test: for the ASCII letters
// of these expressions the two agree once the text is in NFKC, which folds
// the only other members of their case orbits (K, the Kelvin sign, and
// ſ) to ASCII.
func required(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{strings.ToLower(string(re.Rune))}
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []string
		for _, sub := range re.Sub {
			if set := required(sub); set != nil && (best == nil || selective(set, best)) {
				best = set
			}
		}
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			set := required(sub)
			if set == nil {
				return nil
			}
			all = append(all, set...)
		}
		return all
	}
	return nil
}

// selective tells whether a is the better prefilter: its shortest string
// is longer, or as long with fewer strings.
func selective(a, b []string) bool {
	shortest := func(set []string) int {
		n := len(set[0])
		for _, s := range set[1:] {
			n = min(n, len(s))
		}
		return n
	}
	if sa, sb := shortest(a), shortest(b); sa != sb {
		return sa > sb
	}
	return len(a) < len(b)
}

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
	names := strings.Join(quoted, "|")
	// server.tool, and mcp__server__tool as some clients name a server's
	// tools to the model.
	return regexp.MustCompile(`(?i)\b(` + names + `)\.[A-Za-z0-9_][A-Za-z0-9_.-]*|\bmcp__(` + names + `)__[A-Za-z0-9_]+`)
}

// findReference finds the first match of refs in t that is not a host
// name: one inside a URL or an address ("https://docs.github.com/…",
// "me@docs.example"), or followed by a path or a port, names a host
// that shares a server's name, not a tool.
func findReference(refs *regexp.Regexp, t string) (int, int, bool) {
	for _, loc := range refs.FindAllStringIndex(t, -1) {
		at, end := loc[0], loc[1]
		if at > 0 && strings.ContainsRune("/@.:", rune(t[at-1])) || end < len(t) && (t[end] == '/' || t[end] == ':') {
			continue
		}
		return at, end, true
	}
	return 0, 0, false
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
	if len(s) > maxScanned {
		// Read past this, normalizing (NFKD makes one character of 3
		// bytes 33), and the cost of one descriptor is the downstream's
		// to choose. What is not read is not trusted: the finding makes
		// the descriptor wait for a reviewer.
		cut := maxScanned
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		// The excerpt is the text around the cut.
		*out = append(*out, Finding{Category: ScanOversizedText, Pointer: pointer, Key: key, Excerpt: excerpt(s, cut, cut)})
		s = s[:cut]
	}
	// The rules read the text as a model would: invisible characters
	// gone, HTML entities decoded, compatibility forms folded (a
	// fullwidth ＜ is <), typographic quotes straight, every run of
	// spaces one space, every line break a newline, and _ a space (member
	// names are snake_case). Excerpts show that normalized text.
	read := readable(s)
	n := foldMixed(read) // normalizeText(s), keeping read for mixedWord
	add := func(category string, at, end int) {
		*out = append(*out, Finding{Category: category, Pointer: pointer, Key: key, Excerpt: excerpt(n, at, end)})
	}
	// A word that mixes scripts is shown as written when it is there
	// (an entity or an invisible character can make it only in the
	// normalized text): the folded text would hide the look-alikes.
	if at, end, ok := mixedWord(s); ok {
		*out = append(*out, Finding{Category: ScanMixedScript, Pointer: pointer, Key: key, Excerpt: excerpt(s, at, end)})
	} else if at, end, ok := mixedWord(read); ok {
		*out = append(*out, Finding{Category: ScanMixedScript, Pointer: pointer, Key: key, Excerpt: excerpt(read, at, end)})
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
	if at, end, ok := misleadingLink(n, lower); ok {
		add(ScanObscuredDestination, at, end)
	}
	// The blob and reference checks read the text as written and as
	// normalized: a fullwidth "ｂａｎｋ．transfer" is bank.transfer to a
	// model, while a name or a URL-safe blob keeps its "_" only as written.
	texts := []string{s}
	if n != s {
		texts = append(texts, n)
	}
	for _, t := range texts {
		if at, end, ok := encodedBlob(t); ok {
			*out = append(*out, Finding{Category: ScanObscuredDestination, Pointer: pointer, Key: key, Excerpt: excerpt(t, at, end)})
			break
		}
	}
	if refs != nil {
		for _, t := range texts {
			if !strings.Contains(t, ".") && !strings.Contains(t, "__") {
				continue
			}
			if at, end, ok := findReference(refs, t); ok {
				*out = append(*out, Finding{Category: ScanToolReference, Pointer: pointer, Key: key, Excerpt: excerpt(t, at, end)})
				break
			}
		}
	}
}

// encodedBlob finds a base64 or base64url blob of at least 48
// characters in s, whole or wrapped: lines of one width (the last may be
// shorter), at least 16 characters each, separated by nothing but a line
// break and spaces — cutting a blob into lines of 47 must not hide it,
// while identifiers listed one per line rarely share a width. A byte
// loop, not an expression: it reads every long string of every
// descriptor.
func encodedBlob(s string) (int, int, bool) {
	if len(s) < 48 {
		return 0, 0, false
	}
	var (
		joined      []byte
		from        = -1 // the start of the blob being joined, or -1
		last, width int  // the end of its last line (after any '='), the width of its lines
		wrapped     bool // its last line was as wide as the first: another may follow
	)
	for i := 0; i < len(s); {
		if !base64Byte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && base64Byte(s[j]) {
			j++
		}
		end := j
		for end < len(s) && end-j < 2 && s[end] == '=' {
			end++
		}
		gap := s[last:i]
		switch {
		case j-i < 16:
			from = -1
		case from >= 0 && wrapped && end == j && j-i <= width && strings.ContainsAny(gap, "\n\r") && strings.TrimSpace(gap) == "":
			joined = append(joined, s[i:j]...)
			wrapped = j-i == width
		default:
			from, width, wrapped = i, j-i, end == j
			joined = append(joined[:0], s[i:j]...)
		}
		if from >= 0 && len(joined) >= 48 && looksEncoded(string(joined)) && (len(joined) == j-i || mixedCase(joined)) {
			return from, end, true
		}
		last, i = end, end
	}
	return 0, 0, false
}

// mixedCase tells the lines of a blob from identifiers listed one per
// line: encoded bytes have about as many capitals as small letters, words
// in CamelCase one capital in five letters or fewer.
func mixedCase(b []byte) bool {
	var upper, letters int
	for _, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			upper++
			letters++
		case c >= 'a' && c <= 'z':
			letters++
		}
	}
	return upper*4 >= letters && upper*4 <= letters*3
}

func base64Byte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '_' || c == '-'
}

// normalizeText is the text the rules read (see scanString).
func normalizeText(s string) string {
	return foldMixed(readable(s))
}

// readable is normalizeText before the look-alikes of mixed words are
// folded.
func readable(s string) string {
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
	// NFKD rather than NFKC: the combining marks it takes apart are
	// dropped below, so "IMPOR\u0301TANT" (an acute on the R, which NFKC
	// would compose into Ŕ) is IMPORTANT, as a model reads it.
	s = norm.NFKD.String(s)
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if l, ok := latinLookalikes[r]; ok {
			r = l
		}
		switch {
		case unicode.Is(unicode.Mn, r):
			continue
		case r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x1C || r == 0x1D || r == 0x1E ||
			r == 0x2028 || r == 0x2029 || r == 0x85:
			// Every character that some reader takes for a line break
			// (Python's str.splitlines takes all of these).
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
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		next, _ := utf8.DecodeRuneInString(s[i+size:])
		switch {
		case !invisibleRune(r), emojiJoiner(prev, r), r == 0xFE0F && next == 0x20E3, scriptJoiner(prev, r, next):
		case prev == 0x1F3F4 && r >= 0xE0061 && r <= 0xE007A:
			if n := flagTags(s[i:]); n > 0 {
				i += n
				prev = 0xE007F
				continue
			}
			return i, i + size, true
		default:
			return i, i + size, true
		}
		prev = r
		i += size
	}
	return 0, 0, false
}

// scriptJoiner tells the zero-width non-joiner and joiner between two
// letters of a script that is written with them (Persian, Arabic, the
// Indic scripts: "می‌خواهم") from the same characters in a Latin word
// or between look-alike letters, where they only hide a word from a
// reader.
func scriptJoiner(prev, r, next rune) bool {
	if r != 0x200C && r != 0x200D {
		return false
	}
	joins := func(c rune) bool {
		return c >= 0x0300 && (unicode.IsLetter(c) || unicode.IsMark(c)) && !unicode.Is(unicode.Latin, c) &&
			!slices.ContainsFunc(lookalikeScripts, func(t *unicode.RangeTable) bool { return unicode.Is(t, c) })
	}
	return joins(prev) && joins(next)
}

// flagTags is the length of the tag characters of a subdivision flag
// (🏴 then two to seven tag letters, digits included, then the cancel
// tag: England, Scotland, Wales) at the start of s, or 0 when s does not
// start with one: tag characters anywhere else spell hidden text.
func flagTags(s string) int {
	n := 0
	for i, r := range s {
		switch {
		case r == 0xE007F && n >= 2:
			return i + utf8.RuneLen(r)
		case n < 7 && (r >= 0xE0061 && r <= 0xE007A || r >= 0xE0030 && r <= 0xE0039):
			n++
		default:
			return 0
		}
	}
	return 0
}

// invisibleRune reports a character that renders as nothing: every
// format character (Cf: bidirectional controls, zero-width characters,
// Unicode tag characters, which can spell a whole hidden instruction),
// variation selectors (the supplementary ones can carry a byte each),
// line and paragraph separators, the blank letters (the combining
// grapheme joiner, Hangul fillers, the Braille blank), the rest of the
// tag block, private-use characters and noncharacters.
func invisibleRune(r rune) bool {
	switch {
	case r < 0x80:
		return false
	case unicode.Is(unicode.Cf, r),
		r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF, r >= 0x180B && r <= 0x180F,
		r == 0x034F, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0, r == 0x17B4, r == 0x17B5,
		r == 0x2028, r == 0x2029, r == 0x2800,
		r >= 0xE0000 && r <= 0xE0FFF,                   // the tag block and the ignorable code points after it, assigned or not
		unicode.Is(unicode.Co, r),                      // private use: no reader knows what it is, and it can carry bytes
		r >= 0xFDD0 && r <= 0xFDEF, r&0xFFFE == 0xFFFE: // noncharacters
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

// lookalikeScripts are the scripts with letters that pass for Latin
// ones (Unicode's confusables.txt maps many of their letters to Latin):
// a word mixing one of them with Latin letters is the homoglyph trick
// of UTS #39, not writing. Scripts written without spaces beside Latin
// (Han, Kana, Thai) are not here: "Google検索" is ordinary Japanese.
var lookalikeScripts = []*unicode.RangeTable{
	unicode.Cyrillic, unicode.Greek, unicode.Coptic, unicode.Armenian, unicode.Cherokee,
	unicode.Lisu, unicode.Canadian_Aboriginal, unicode.Tifinagh,
}

// scientificGreek are Greek letters written beside Latin ones as symbols,
// units and variables (µs, kΩ, ΔT, βx; NFKD makes the micro and ohm signs
// Greek) that look like no Latin letter: a word they mix into is not a
// finding. The micro and ohm signs themselves are here too: the text as
// written is read as well. The Greek letters that pass for Latin ones
// (α, ε, ι, κ, ν, ο, ρ, τ, υ, χ, ω and most capitals) are not.
const scientificGreek = "βγδζθλμξπσφψΓΔΘΛΞΠΣΦΨΩ\u00b5\u2126"

// latinLookalikes are Latin letters that pass for others (dotless i,
// script g, alpha, small capitals) and that NFKD leaves as they are:
// they are written as the letters they pass for wherever they are, since
// they are Latin and make no word mixed.
var latinLookalikes = map[rune]rune{
	'ı': 'i', 'ȷ': 'j', 'ɡ': 'g', 'ɑ': 'a', 'ɩ': 'i', 'ʋ': 'v',
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ꜰ': 'f', 'ɢ': 'g', 'ʜ': 'h', 'ɪ': 'i', 'ᴊ': 'j',
	'ᴋ': 'k', 'ʟ': 'l', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u',
	'ᴠ': 'v', 'ᴡ': 'w', 'ʏ': 'y', 'ᴢ': 'z',
}

// confusables are the usual Cyrillic, Greek and Armenian look-alikes of
// Latin letters. golang.org/x/text has no confusables table and NFKC
// folds none of them; this small one lets the rules read
// "ignоre" (Cyrillic о) as "ignore". Only mixed words are folded: a word
// wholly in Cyrillic or Greek is text in that language.
var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'е': 'e', 'о': 'o', 'р': 'p', 'с': 'c', 'у': 'y', 'х': 'x', 'і': 'i', 'ј': 'j', 'ѕ': 's',
	'ԁ': 'd', 'ӏ': 'l', 'һ': 'h', 'ԛ': 'q', 'ԝ': 'w', 'ү': 'y',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T',
	'Х': 'X', 'Ѕ': 'S', 'І': 'I', 'Ј': 'J', 'У': 'Y', 'Ү': 'Y',
	// Greek
	'ο': 'o', 'α': 'a', 'ν': 'v', 'ι': 'i', 'κ': 'k', 'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O',
	'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
	// Armenian
	'օ': 'o', 'ս': 'u', 'ո': 'n', 'հ': 'h', 'ց': 'g',
}

// mixedWords yields the bounds of every word of s that mixes Latin
// letters with letters of a look-alike script. A word is a maximal run
// of letters, marks and digits: digits join it, since "pаypal2" is one
// identifier, while "_" (a space once normalized), "-" and "." end it, so
// that Russian text naming an English product mixes scripts only across
// words.
func mixedWords(s string) iter.Seq2[int, int] {
	return words(s, func(latin, other, _ bool) bool { return latin && other })
}

// foldableWords yields the words whose look-alikes foldMixed writes as
// Latin: the mixed words, and the words written wholly in look-alike
// letters ("ЅУЅТЕМ", "ѕѕһ" in Cyrillic), which read as Latin words to a
// model and are no finding on their own: short Russian words ("сор",
// "ох") are such words too, and folding them only changes what the
// rules read, never what they report by itself.
func foldableWords(s string) iter.Seq2[int, int] {
	return words(s, func(latin, other, lookalike bool) bool { return other && (latin || lookalike) })
}

// words yields the bounds of the words of s (see mixedWords) that keep
// says to: whether the word holds a Latin letter, a letter of a
// look-alike script, and whether every letter it holds is a look-alike
// of a Latin one.
func words(s string, keep func(latin, other, lookalike bool) bool) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		if ascii(s) {
			return // the common case: one script
		}
		at, latin, other, lookalike := -1, false, false, true
		for i, r := range s {
			if !unicode.IsLetter(r) && !unicode.IsMark(r) && !unicode.IsDigit(r) {
				if at >= 0 && keep(latin, other, lookalike) && !yield(at, i) {
					return
				}
				at, latin, other, lookalike = -1, false, false, true
				continue
			}
			if at < 0 {
				at = i
			}
			if _, ok := confusables[r]; !ok && unicode.IsLetter(r) && r >= 0x80 {
				lookalike = false
			}
			switch {
			case r < 0x80:
				latin = latin || unicode.IsLetter(r)
			case unicode.Is(unicode.Latin, r):
				latin = true
			case !other && !strings.ContainsRune(scientificGreek, r) && slices.ContainsFunc(lookalikeScripts, func(t *unicode.RangeTable) bool { return unicode.Is(t, r) }):
				other = true
			}
		}
		if at >= 0 && keep(latin, other, lookalike) {
			yield(at, len(s))
		}
	}
}

// mixedWord finds the first word of s that mixes scripts (see
// mixedWords).
func mixedWord(s string) (int, int, bool) {
	for at, end := range mixedWords(s) {
		return at, end, true
	}
	return 0, 0, false
}

// foldMixed writes the look-alikes of every mixed word of s, and of every
// word wholly of look-alikes (see foldableWords), as the Latin letters
// they pass for, except in a URL: a host is not a word, and its
// look-alikes are what the obscured_destination rule reads.
func foldMixed(s string) string {
	var b []byte
	// The token around each word (between spaces or line breaks) is
	// found by scans that only move forward: a string of many mixed
	// words and no space must not cost a scan of the whole string per
	// word.
	last, from, to, seen := 0, 0, -1, 0
	url := false // whether s[from:to] holds a URL
	for at, end := range foldableWords(s) {
		if k := strings.LastIndexAny(s[seen:at], " \n"); k >= 0 {
			from, to = seen+k+1, -1
		}
		seen = at
		if to < end {
			to = len(s)
			if k := strings.IndexAny(s[end:], " \n"); k >= 0 {
				to = end + k
			}
			url = strings.Contains(s[from:to], "://")
		}
		if url {
			continue
		}
		b = append(b, s[last:at]...)
		for _, r := range s[at:end] {
			if l, ok := confusables[r]; ok {
				r = l
			}
			b = utf8.AppendRune(b, r)
		}
		last = end
	}
	if b == nil {
		return s
	}
	return string(append(b, s[last:]...))
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// Bounds of what misleadingLink reads of a markdown link: its text (as
// anchorRE's) and its target (a host is at its start).
const (
	maxLinkText   = 300
	maxLinkTarget = 2048
)

// refDefRE is a markdown link reference definition: its label and its
// target.
var refDefRE = regexp.MustCompile(`(?m)^[ >]{0,8}\[([^\]\n]{1,100})\]: ?<?([^ \n>]+)`)

// refUseRE is a use of a reference: "[text][label]", "[text][]" or
// "[text]" alone (its own label).
var refUseRE = regexp.MustCompile(`\[([^\]\n]{1,300})\](\[([^\]\n]{0,100})\])?`)

// maxRefDefs bounds the definitions misleadingReference reads.
const maxRefDefs = 256

// misleadingReference is misleadingLink for reference links:
// "[github.com/login][1]" with "[1]: https://evil.example/" elsewhere in
// the text. Labels match without regard to case, as in CommonMark.
func misleadingReference(s string) (int, int, bool) {
	if !strings.Contains(s, "]:") {
		return 0, 0, false
	}
	defs := map[string]string{}
	for _, m := range refDefRE.FindAllStringSubmatch(s, maxRefDefs) {
		label := strings.ToLower(m[1])
		if _, seen := defs[label]; !seen { // the first definition wins
			defs[label] = m[2][:min(len(m[2]), maxLinkTarget)]
		}
	}
	for _, m := range refUseRE.FindAllStringSubmatchIndex(s, -1) {
		text := s[m[2]:m[3]]
		label := text
		if m[6] >= 0 && m[7] > m[6] {
			label = s[m[6]:m[7]]
		}
		if dest, ok := defs[strings.ToLower(label)]; ok && misleading(text, dest) {
			return m[0], m[1], true
		}
	}
	return 0, 0, false
}

// anchorRE is an HTML link: its target and its text.
var anchorRE = regexp.MustCompile(`(?is)<a\s[^>]*?\bhref\s*=\s*["']?([^"'\s>]+)[^>]*>(.{0,300}?)</a\s*>`)

// misleadingLink finds a link whose text names a host other than the
// one it leads to: "[docs.example.com](https://evil.example/)", or the
// same as an HTML anchor. lower is s in lower case.
func misleadingLink(s, lower string) (int, int, bool) {
	for i := 0; ; {
		j := strings.Index(s[i:], "](")
		if j < 0 {
			break
		}
		mid := i + j
		i = mid + 2
		// The text and the target are read only so far (as anchorRE's
		// text): every "](" of a long string must not cost a scan of it.
		lo := max(mid-maxLinkText, 0)
		open := strings.LastIndexByte(s[lo:mid], '[')
		if open >= 0 {
			open += lo
		}
		if open < 0 || strings.IndexByte(s[open+1:mid], ']') >= 0 || open > 0 && s[open-1] == '!' {
			continue // no text, or an image, whose text is no link's
		}
		dest := strings.TrimLeft(s[i:], " \n")
		end := len(s) - len(dest)
		if strings.HasPrefix(dest, "<") {
			dest = dest[1:]
			end++
		}
		dest = dest[:min(len(dest), maxLinkTarget)]
		if k := strings.IndexAny(dest, " \n)>\"'"); k >= 0 {
			dest = dest[:k]
		}
		end += len(dest)
		if misleading(s[open+1:mid], dest) {
			return open, end, true
		}
	}
	if at, end, ok := misleadingReference(s); ok {
		return at, end, true
	}
	if strings.Contains(lower, "href") {
		for _, m := range anchorRE.FindAllStringSubmatchIndex(s, -1) {
			if misleading(s[m[4]:m[5]], s[m[2]:m[3]]) {
				return m[0], m[1], true
			}
		}
	}
	return 0, 0, false
}

// misleading tells whether a link's text names a host and its target
// leads elsewhere. A relative target (no host) is not compared.
func misleading(text, dest string) bool {
	named := namedHost(text)
	if named == "" {
		return false
	}
	to := urlHost(dest)
	return to != "" && !sameSite(named, to)
}

// namedHost is the host a link's text names: that of any URL in it, or
// the whole text when it is a bare host name ("docs.example.com/x").
// A bare word with a dot is a host only when its last label is a top
// level domain and not a file extension: "[config.json](…)" names a
// file. Other words with dots ("os.path") are not read as hosts.
func namedHost(text string) string {
	text = stripTags(text)
	for f := range strings.FieldsSeq(text) {
		if h := urlHost(f); h != "" && strings.Contains(f, "://") {
			return h
		}
	}
	text = strings.Trim(text, " \n*`\"'<>")
	if strings.ContainsAny(text, " \n") {
		return ""
	}
	h := hostPart(text)
	dot := strings.LastIndexByte(h, '.')
	if dot <= 0 {
		return ""
	}
	tld := h[dot+1:]
	if len(tld) < 2 || fileExtensions[tld] || strings.IndexFunc(tld, func(r rune) bool { return !unicode.IsLetter(r) }) >= 0 {
		return ""
	}
	return h
}

// fileExtensions are extensions of files a link's text often names; some
// are also country domains (.md, .py, .sh, .rs), read as files here.
var fileExtensions = map[string]bool{
	"json": true, "md": true, "txt": true, "js": true, "mjs": true, "ts": true, "py": true, "go": true, "rs": true,
	"sh": true, "yaml": true, "yml": true, "toml": true, "html": true, "htm": true, "css": true, "csv": true,
	"xml": true, "pdf": true, "png": true, "jpg": true, "jpeg": true, "gif": true, "svg": true, "zip": true,
	"gz": true, "tgz": true, "tar": true, "exe": true, "log": true, "conf": true, "cfg": true, "ini": true,
	"sql": true, "java": true, "rb": true, "php": true, "lock": true, "mod": true, "sum": true, "ipynb": true,
	"wasm": true, "jar": true, "dll": true, "so": true, "proto": true, "rst": true, "tsx": true, "jsx": true,
}

// urlHost is the host of an absolute or scheme-relative URL, or "".
//
// A browser reads the special schemes (http, https, ws, wss, ftp) with
// any number of slashes or backslashes after the colon, none included:
// "https:/evil.example" and "https:\\evil.example" lead to
// evil.example, and so does the link.
func urlHost(u string) string {
	u = strings.Trim(u, " \n<>\"'`*")
	if k := strings.IndexByte(u, ':'); k > 0 && specialSchemes[strings.ToLower(u[:k])] {
		u = strings.TrimLeft(u[k+1:], `/\`)
	} else if k := strings.Index(u, "://"); k > 0 && validScheme(u[:k]) {
		u = u[k+3:]
	} else if strings.HasPrefix(u, "//") {
		u = u[2:]
	} else {
		return ""
	}
	return hostPart(u)
}

// specialSchemes are the WHATWG URL standard's special schemes but file:
// those whose authority a browser finds whatever the slashes.
var specialSchemes = map[string]bool{"http": true, "https": true, "ws": true, "wss": true, "ftp": true}

func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !(c >= 'a' && c <= 'z' || i > 0 && (s[i] >= '0' && s[i] <= '9' || s[i] == '+' || s[i] == '.' || s[i] == '-')) {
			return false
		}
	}
	return true
}

// hostPart is the host of an authority followed by anything: the
// user-info and the port cut off, in lower case, without a final dot.
func hostPart(s string) string {
	if k := strings.IndexAny(s, "/?#\\ \n"); k >= 0 {
		s = s[:k]
	}
	if k := strings.LastIndexByte(s, '@'); k >= 0 {
		s = s[k+1:]
	}
	if k := strings.LastIndexByte(s, ':'); k >= 0 && !strings.HasSuffix(s, "]") {
		s = s[:k]
	}
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

// sameSite tells whether two hosts are one site: equal once a leading
// "www." is dropped, or one a subdomain of the other — "[example.com]"
// leading to docs.example.com is not misleading. Registrable domains are
// not computed (that needs the public suffix list): two subdomains of
// one domain ("docs.example.com" shown, "cdn.example.com" the target)
// count as different, and a host is a subdomain only of a name with a
// dot, never of a bare top level domain.
func sameSite(a, b string) bool {
	a, b = strings.TrimPrefix(a, "www."), strings.TrimPrefix(b, "www.")
	if len(a) < len(b) {
		a, b = b, a
	}
	return a == b || strings.Contains(b, ".") && strings.HasSuffix(a, "."+b)
}

// stripTags drops HTML tags from a link's text ("<b>docs.example.com</b>").
func stripTags(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>' && in:
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}
