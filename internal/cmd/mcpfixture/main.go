// Command mcpfixture is a stdio MCP server for the gateway's tests: a real
// process whose behaviour the test chooses through FIXTURE_* environment
// variables, including the ways a downstream misbehaves (pagination that
// never ends, garbage and oversized lines, duplicate responses, crashes,
// a process that ignores SIGTERM). It writes its raw JSON-RPC by hand,
// not through the project's server core, so that it can break every rule
// the core keeps. It is a development aid, never shipped.
//
//	FIXTURE_ERA        modern (default: answers server/discover) or legacy
//	                   (server/discover is -32601; initialize negotiates)
//	FIXTURE_VERSION    the version a legacy server answers initialize with
//	                   (default: the one asked for)
//	FIXTURE_NAME       serverInfo name (default mcpfixture)
//	FIXTURE_TOOLS      comma-separated tool names (default echo)
//	FIXTURE_PAGES      how tools/list pages: "1" (default), a number of
//	                   pages, or one of empty-cursor, empty-page, repeat,
//	                   cycle, endless, error-at-2, hang-at-2, bad-tools,
//	                   bad-cursor
//	FIXTURE_LOG        a file that receives every line read, one per line
//	FIXTURE_IGNORE_TERM  1: ignore SIGTERM and do not exit at EOF
//	FIXTURE_STDERR     a number of lines to write to stderr at start
//	FIXTURE_DESCRIPTORS  a file holding a JSON array of raw tool
//	                   descriptors, listed instead of FIXTURE_TOOLS' and
//	                   read again on every tools/list; SIGHUP sends
//	                   notifications/tools/list_changed, so a test can
//	                   change the list after the first listing
//	FIXTURE_PIDFILE    a file the process writes its pid to at start (for
//	                   the test's SIGHUP)
//	FIXTURE_INSTRUCTIONS  the server's instructions (default none)
//	FIXTURE_PROMPTS    a file holding a JSON array of raw prompt
//	                   descriptors: the server then declares prompts, lists
//	                   them (read again on every prompts/list; SIGHUP
//	                   announces it too) and answers prompts/get of any
//	                   listed name with one user message naming the prompt
//	                   and its arguments (a prompt named bad-result answers
//	                   with a message of role "system", one named ask with
//	                   an input_required result); it also declares
//	                   completions, answering two values named after it
//	FIXTURE_COMPLETIONS  comma-separated values every completion/complete
//	                   answers with instead, whatever was typed
//	FIXTURE_RESOURCES  a file holding {"resources":[…],"resourceTemplates":[…]}:
//	                   the server then declares resources, lists both (read
//	                   again on every list; in the legacy era SIGHUP
//	                   announces it too) and answers resources/read of
//	                   a listed URI, or of one that begins with a template's
//	                   text before its first "{", with one text naming the
//	                   URI and the server ("bad://…" answers without a uri,
//	                   "ask://…" with an input_required result);
//	                   a resources/subscribe of a URI that begins with
//	                   "slowfail:" fails, 300 ms later
//	FIXTURE_LOGGING    1: the server declares logging and answers
//	                   logging/setLevel
//
// Tools, whatever they are named in FIXTURE_TOOLS, behave by name:
// echo (returns its arguments), slow (sleeps arguments.ms), hang (until
// cancelled), crash (exits), progress (three notifications/progress
// first), garbage and oversize (a bad line before the answer), duplicate
// (answers twice), wrong-id (an answer to another id first), error (a
// JSON-RPC error), iserror (an isError result), listchanged (sends
// notifications/tools/list_changed after adding a tool named "added" to
// its list: unasked in the legacy era, on each open subscriptions/listen
// in the modern one), environ (returns the names of its environment variables),
// whoami (returns FIXTURE_NAME), embed (an embedded resource labelled
// FIXTURE_EMBED; a prompt named embed answers with one too), array (structuredContent [1,2,3]), touch
// (sends notifications/resources/updated for every subscribed resource
// first), sample and elicit (send sampling/createMessage or
// elicitation/create and return the answer as text), ask (answers
// input_required with one elicitation and state "ask-state-1" when the
// call's _meta declares elicitation, an isError result when not; the
// retry with both returns the answer as text), ask-forever
// (input_required whatever the call), sample-cr (sample,
// with bare CRs as whitespace in the request's params), flood (sends 4000
// log messages of 16 KiB first), log (sends a
// notifications/message first). Any other name echoes.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type msg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type server struct {
	out     *bufio.Writer
	mu      sync.Mutex
	log     *os.File
	modern  bool
	tools   []string
	pages   string
	version string
	name    string
	descs   string   // FIXTURE_DESCRIPTORS
	listed  []string // what the current listing read of it, under mu
	prompts string   // FIXTURE_PROMPTS
	res     string   // FIXTURE_RESOURCES
	// followed are the URIs resources/subscribe asked for (legacy era),
	// resListens the open subscriptions/listen requests that follow
	// resources, by raw id (modern era); both under mu.
	followed   map[string]bool
	resListens map[string][]string

	cancelled sync.Map // id (raw) → *cancelSignal
	answers   sync.Map // id of a request the fixture sent (raw) → chan msg
	subs      []string // the raw ids of open subscriptions/listen requests, under mu
	listCalls int
}

func main() {
	s := &server{
		out:     bufio.NewWriter(os.Stdout),
		modern:  os.Getenv("FIXTURE_ERA") != "legacy",
		tools:   strings.Split(envOr("FIXTURE_TOOLS", "echo"), ","),
		pages:   envOr("FIXTURE_PAGES", "1"),
		version: os.Getenv("FIXTURE_VERSION"),
		name:    envOr("FIXTURE_NAME", "mcpfixture"),
		descs:   os.Getenv("FIXTURE_DESCRIPTORS"),
		prompts: os.Getenv("FIXTURE_PROMPTS"),
		res:     os.Getenv("FIXTURE_RESOURCES"),
	}
	if p := os.Getenv("FIXTURE_PIDFILE"); p != "" {
		if err := os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "mcpfixture:", err)
			os.Exit(2)
		}
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			s.listChanged()
		}
	}()
	if p := os.Getenv("FIXTURE_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mcpfixture:", err)
			os.Exit(2)
		}
		s.log = f
	}
	ignore := os.Getenv("FIXTURE_IGNORE_TERM") == "1"
	if ignore {
		signal.Ignore(syscall.SIGTERM)
	}
	if n, _ := strconv.Atoi(os.Getenv("FIXTURE_STDERR")); n > 0 {
		for i := range n {
			fmt.Fprintf(os.Stderr, "fixture stderr line %d\n", i)
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		line := in.Bytes()
		if s.log != nil {
			s.mu.Lock()
			s.log.Write(append(append([]byte(nil), line...), '\n'))
			s.mu.Unlock()
		}
		var m msg
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		s.handle(m)
	}
	for ignore {
		time.Sleep(time.Hour) // EOF changes nothing; only SIGKILL ends this process
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func (s *server) write(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.WriteString(line)
	s.out.WriteByte('\n')
	s.out.Flush()
}

func (s *server) result(id json.RawMessage, result string) {
	s.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

func (s *server) fail(id json.RawMessage, code int, message string) {
	s.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, message))
}

// instructions is the ,"instructions":… member of a handshake result, or
// nothing.
func (s *server) instructions() string {
	v := os.Getenv("FIXTURE_INSTRUCTIONS")
	if v == "" {
		return ""
	}
	b, _ := json.Marshal(v)
	return `,"instructions":` + string(b)
}

// cancelSignal is the signal of the cancellation of request id, made by
// whichever of the request and its cancellation comes first.
func (s *server) cancelSignal(id json.RawMessage) *cancelSignal {
	c, _ := s.cancelled.LoadOrStore(string(id), &cancelSignal{ch: make(chan struct{})})
	return c.(*cancelSignal)
}

// cancelSignal is closed once, by the first cancellation of a request.
type cancelSignal struct {
	once sync.Once
	ch   chan struct{}
}

func (c *cancelSignal) fire() { c.once.Do(func() { close(c.ch) }) }

func (s *server) serverInfo() string {
	return fmt.Sprintf(`{"name":%q,"version":"1.0.0"}`, s.name)
}

func (s *server) handle(m msg) {
	if m.ID == nil {
		if m.Method == "notifications/cancelled" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			json.Unmarshal(m.Params, &p)
			// The request's handler may not have begun yet: the signal
			// waits for it.
			s.cancelSignal(p.RequestID).fire()
			s.mu.Lock()
			delete(s.resListens, string(p.RequestID))
			s.mu.Unlock()
		}
		return
	}
	if m.Method == "" {
		// The answer to a request of the fixture's own (sample).
		if ch, ok := s.answers.Load(string(m.ID)); ok {
			ch.(chan msg) <- m
		}
		return
	}
	switch m.Method {
	case "server/discover":
		if !s.modern {
			s.fail(m.ID, -32601, "Method not found")
			return
		}
		s.result(m.ID, fmt.Sprintf(`{"supportedVersions":["2026-07-28"],"capabilities":%s%s,"_meta":{"io.modelcontextprotocol/serverInfo":%s},"resultType":"complete"}`, s.capabilities(), s.instructions(), s.serverInfo()))
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(m.Params, &p)
		v := s.version
		if v == "" {
			v = p.ProtocolVersion
		}
		s.result(m.ID, fmt.Sprintf(`{"protocolVersion":%q,"capabilities":%s%s,"serverInfo":%s}`, v, s.capabilities(), s.instructions(), s.serverInfo()))
	case "ping":
		s.result(m.ID, `{}`)
	case "subscriptions/listen":
		if !s.modern {
			s.fail(m.ID, -32601, "Method not found")
			return
		}
		var lp struct {
			Notifications struct {
				Resources []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		}
		json.Unmarshal(m.Params, &lp)
		if len(lp.Notifications.Resources) > 0 {
			s.mu.Lock()
			if s.resListens == nil {
				s.resListens = map[string][]string{}
			}
			s.resListens[string(m.ID)] = lp.Notifications.Resources
			s.mu.Unlock()
			uris, _ := json.Marshal(lp.Notifications.Resources)
			s.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s},"notifications":{"resourceSubscriptions":%s}}}`, m.ID, uris))
			return
		}
		// The request stays pending: a 2026-07-28 server speaks of its
		// list only on the subscriptions a client holds open.
		s.mu.Lock()
		s.subs = append(s.subs, string(m.ID))
		s.mu.Unlock()
		s.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s},"notifications":{"toolsListChanged":true}}}`, m.ID))
	case "tools/list":
		s.list(m)
	case "tools/call":
		go s.call(m)
	case "prompts/list":
		if s.prompts == "" {
			s.fail(m.ID, -32601, "Method not found")
			return
		}
		raw, err := s.readPrompts()
		if err != nil {
			s.fail(m.ID, -32603, "FIXTURE_PROMPTS: "+err.Error())
			return
		}
		b, _ := json.Marshal(raw)
		s.result(m.ID, `{"prompts":`+string(b)+`}`)
	case "prompts/get":
		s.getPrompt(m)
	case "logging/setLevel":
		if os.Getenv("FIXTURE_LOGGING") != "1" {
			s.fail(m.ID, -32601, "Method not found")
			return
		}
		s.result(m.ID, `{}`)
	case "completion/complete":
		// Two completions of the value, named after this server.
		var p struct {
			Argument struct{ Value string } `json:"argument"`
		}
		json.Unmarshal(m.Params, &p)
		values := []string{p.Argument.Value + "-" + s.name + "-1", p.Argument.Value + "-" + s.name + "-2"}
		if v := os.Getenv("FIXTURE_COMPLETIONS"); v != "" {
			values = strings.Split(v, ",")
		}
		enc, _ := json.Marshal(values)
		s.result(m.ID, fmt.Sprintf(`{"completion":{"values":%s,"total":%d,"hasMore":false}}`, enc, len(values)))
	case "resources/list", "resources/templates/list":
		lists, err := s.readResources()
		if err != nil {
			s.fail(m.ID, -32603, "FIXTURE_RESOURCES: "+err.Error())
			return
		}
		if m.Method == "resources/list" {
			s.result(m.ID, `{"resources":`+string(orEmpty(lists.Resources))+`}`)
		} else {
			s.result(m.ID, `{"resourceTemplates":`+string(orEmpty(lists.Templates))+`}`)
		}
	case "resources/read":
		s.readResource(m)
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		json.Unmarshal(m.Params, &p)
		if m.Method == "resources/subscribe" && strings.HasPrefix(p.URI, "slowfail:") {
			time.Sleep(300 * time.Millisecond)
			s.fail(m.ID, -32603, "subscription failed")
			return
		}
		s.mu.Lock()
		if s.followed == nil {
			s.followed = map[string]bool{}
		}
		if m.Method == "resources/subscribe" {
			s.followed[p.URI] = true
		} else {
			delete(s.followed, p.URI)
		}
		s.mu.Unlock()
		s.result(m.ID, `{}`)
	default:
		s.fail(m.ID, -32601, "Method not found")
	}
}

// capabilities is the handshake's capabilities object.
func (s *server) capabilities() string {
	caps := `{"tools":{"listChanged":true}`
	if s.prompts != "" {
		caps += `,"prompts":{"listChanged":true},"completions":{}`
	}
	if s.res != "" {
		caps += `,"resources":{"listChanged":true,"subscribe":true}`
	}
	if os.Getenv("FIXTURE_LOGGING") == "1" {
		caps += `,"logging":{}`
	}
	return caps + "}"
}

type resourceLists struct {
	Resources []json.RawMessage `json:"resources"`
	Templates []json.RawMessage `json:"resourceTemplates"`
}

func orEmpty(v []json.RawMessage) []byte {
	if v == nil {
		return []byte("[]")
	}
	b, _ := json.Marshal(v)
	return b
}

func (s *server) readResources() (resourceLists, error) {
	var l resourceLists
	if s.res == "" {
		return l, fmt.Errorf("not set")
	}
	b, err := os.ReadFile(s.res)
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(b, &l)
}

// readResource answers a resources/read of a listed URI, or of one a
// template's literal start begins.
func (s *server) readResource(m msg) {
	var p struct {
		URI string `json:"uri"`
	}
	lists, err := s.readResources()
	if err != nil || json.Unmarshal(m.Params, &p) != nil {
		s.fail(m.ID, -32602, "Invalid params")
		return
	}
	found := false
	for _, r := range lists.Resources {
		var d struct {
			URI string `json:"uri"`
		}
		found = found || (json.Unmarshal(r, &d) == nil && d.URI == p.URI)
	}
	for _, r := range lists.Templates {
		var d struct {
			T string `json:"uriTemplate"`
		}
		if json.Unmarshal(r, &d) == nil {
			lit, _, _ := strings.Cut(d.T, "{")
			found = found || strings.HasPrefix(p.URI, lit)
		}
	}
	if !found {
		s.fail(m.ID, -32002, "Resource not found")
		return
	}
	text, _ := json.Marshal(fmt.Sprintf("resource %s of %s", p.URI, s.name))
	uri, _ := json.Marshal(p.URI)
	if strings.HasPrefix(p.URI, "bad://") {
		s.result(m.ID, fmt.Sprintf(`{"contents":[{"text":%s}]}`, text))
		return
	}
	if strings.HasPrefix(p.URI, "ask://") {
		s.result(m.ID, askInput)
		return
	}
	s.result(m.ID, fmt.Sprintf(`{"contents":[{"uri":%s,"mimeType":"text/plain","text":%s}]}`, uri, text))
}

func (s *server) readPrompts() ([]json.RawMessage, error) {
	b, err := os.ReadFile(s.prompts)
	if err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	return raw, json.Unmarshal(b, &raw)
}

// askInput is a 2026-07-28 input_required result: the answer to a
// prompts/get of a prompt named ask, and to a resources/read of an
// ask:// URI.
const askInput = `{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"fixture asks","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"ask-state-1"}`

// getPrompt answers a prompts/get of a listed prompt with one message
// that names it and its arguments, so that a test reads what arrived.
func (s *server) getPrompt(m msg) {
	var p struct {
		Name      string            `json:"name"`
		Arguments map[string]string `json:"arguments"`
	}
	if s.prompts == "" || json.Unmarshal(m.Params, &p) != nil {
		s.fail(m.ID, -32602, "Invalid params")
		return
	}
	raw, err := s.readPrompts()
	if err != nil {
		s.fail(m.ID, -32603, "FIXTURE_PROMPTS: "+err.Error())
		return
	}
	found := false
	for _, r := range raw {
		var d struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r, &d) == nil && d.Name == p.Name {
			found = true
		}
	}
	if !found {
		s.fail(m.ID, -32602, "Unknown prompt")
		return
	}
	if p.Name == "ask" {
		s.result(m.ID, askInput)
		return
	}
	role := "user"
	if p.Name == "bad-result" {
		role = "system"
	}
	args, _ := json.Marshal(p.Arguments)
	text, _ := json.Marshal(fmt.Sprintf("prompt %s of %s with %s", p.Name, s.name, args))
	content := fmt.Sprintf(`{"type":"text","text":%s}`, text)
	if p.Name == "embed" {
		content = embedded()
	}
	s.result(m.ID, fmt.Sprintf(`{"description":"fixture prompt","messages":[{"role":%q,"content":%s}]}`, role, content))
}

// embedded is a content block embedding a resource labelled with
// FIXTURE_EMBED (default embed://fixture).
func embedded() string {
	uri, _ := json.Marshal(envOr("FIXTURE_EMBED", "embed://fixture"))
	return fmt.Sprintf(`{"type":"resource","resource":{"uri":%s,"mimeType":"text/plain","text":"embedded by the fixture"}}`, uri)
}

func (s *server) descriptor(name string) string {
	return fmt.Sprintf(`{"name":%q,"description":"fixture tool %s","inputSchema":{"type":"object"}}`, name, name)
}

// list answers one tools/list page, as FIXTURE_PAGES says.
func (s *server) list(m msg) {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	json.Unmarshal(m.Params, &p)
	cursor := ""
	if p.Cursor != nil {
		cursor = *p.Cursor
	}
	s.mu.Lock()
	s.listCalls++
	var tools []string
	for _, t := range s.tools {
		tools = append(tools, s.descriptor(t))
	}
	s.mu.Unlock()
	if s.descs != "" {
		// Read again at the start of every listing; the later pages of
		// one listing use what its first page read.
		s.mu.Lock()
		cached := s.listed
		s.mu.Unlock()
		if p.Cursor == nil || cached == nil {
			b, err := os.ReadFile(s.descs)
			var raw []json.RawMessage
			if err == nil {
				err = json.Unmarshal(b, &raw)
			}
			if err != nil {
				s.fail(m.ID, -32603, "FIXTURE_DESCRIPTORS: "+err.Error())
				return
			}
			cached = make([]string, len(raw))
			for i, r := range raw {
				cached[i] = string(r)
			}
			s.mu.Lock()
			s.listed = cached
			s.mu.Unlock()
		}
		tools = cached
	}
	page := func(descs []string, next string) {
		body := `{"tools":[` + strings.Join(descs, ",") + `]`
		if next != "none" {
			body += `,"nextCursor":` + next
		}
		s.result(m.ID, body+`}`)
	}
	switch s.pages {
	case "empty-cursor": // page 1 hands out "" as its cursor, which must continue
		if p.Cursor == nil {
			page(tools[:1], `""`)
		} else {
			page(tools[1:], "none")
		}
	case "empty-page":
		switch cursor {
		case "":
			page(tools[:1], `"b"`)
		case "b":
			page(nil, `"c"`)
		default:
			page(tools[1:], `null`)
		}
	case "repeat":
		page(tools[:1], `"same"`)
	case "cycle":
		switch cursor {
		case "", "a":
			page(tools[:1], `"b"`)
		default:
			page(tools[1:], `"a"`)
		}
	case "endless":
		n, _ := strconv.Atoi(cursor)
		page([]string{s.descriptor(fmt.Sprintf("t%d", n))}, strconv.Quote(strconv.Itoa(n+1)))
	case "error-at-2", "hang-at-2":
		if p.Cursor == nil {
			page(tools[:1], `"2"`)
		} else if s.pages == "error-at-2" {
			s.fail(m.ID, -32603, "page two failed")
		} // hang: no answer at all
	case "bad-tools":
		s.result(m.ID, `{"tools":{"not":"an array"}}`)
	case "bad-cursor":
		s.result(m.ID, `{"tools":[],"nextCursor":7}`)
	default:
		n, _ := strconv.Atoi(s.pages)
		n = max(n, 1)
		i, _ := strconv.Atoi(cursor)
		per := (len(tools) + n - 1) / n
		lo, hi := min(i*per, len(tools)), min((i+1)*per, len(tools))
		next := "none"
		if i+1 < n {
			next = strconv.Quote(strconv.Itoa(i + 1))
		}
		page(tools[lo:hi], next)
	}
}

type callParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   *string         `json:"requestState"`
	Meta           struct {
		ProgressToken      json.RawMessage `json:"progressToken"`
		ClientCapabilities struct {
			Elicitation json.RawMessage `json:"elicitation"`
		} `json:"io.modelcontextprotocol/clientCapabilities"`
	} `json:"_meta"`
}

func (s *server) call(m msg) {
	var p callParams
	json.Unmarshal(m.Params, &p)
	args := p.Arguments
	if args == nil {
		args = json.RawMessage(`{}`)
	}
	echo := func() {
		text, _ := json.Marshal(string(args))
		s.result(m.ID, fmt.Sprintf(`{"content":[{"type":"text","text":%s}],"structuredContent":%s,"isError":false}`, text, args))
	}
	switch p.Name {
	case "slow":
		var a struct {
			Ms int `json:"ms"`
		}
		json.Unmarshal(args, &a)
		time.Sleep(time.Duration(a.Ms) * time.Millisecond)
		echo()
	case "hang":
		<-s.cancelSignal(m.ID).ch
		if s.log != nil {
			s.mu.Lock()
			fmt.Fprintf(s.log, "{\"fixture\":\"cancelled\",\"id\":%s}\n", m.ID)
			s.mu.Unlock()
		}
	case "crash":
		os.Exit(3)
	case "progress":
		for i := 1; i <= 3; i++ {
			s.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":3}}`,
				p.Meta.ProgressToken, i))
		}
		echo()
	case "garbage":
		s.write(`this is not JSON {`)
		s.write(`{"jsonrpc":"2.0","id":[1],"result":{}}`)
		echo()
	case "oversize":
		s.write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("x", 2<<20) + `"}}`)
		echo()
	case "duplicate":
		echo()
		echo()
	case "wrong-id":
		s.result(json.RawMessage(`987654`), `{"content":[],"isError":false}`)
		echo()
	case "error":
		s.fail(m.ID, -32050, "the fixture says no")
	case "iserror":
		s.result(m.ID, `{"content":[{"type":"text","text":"it went wrong"}],"isError":true}`)
	case "environ":
		names := []string{}
		for _, kv := range os.Environ() {
			k, _, _ := strings.Cut(kv, "=")
			names = append(names, k)
		}
		b, _ := json.Marshal(map[string]any{"names": names})
		s.result(m.ID, fmt.Sprintf(`{"content":[{"type":"text","text":%q}],"structuredContent":%s,"isError":false}`, b, b))
	case "listchanged":
		s.mu.Lock()
		s.tools = append(s.tools, "added")
		s.mu.Unlock()
		s.listChanged()
		echo()
	case "array":
		s.result(m.ID, `{"content":[{"type":"text","text":"[1,2,3]"}],"structuredContent":[1,2,3],"isError":false}`)
	case "sample", "elicit", "sample-cr":
		// A server-to-client request while the call is served; the
		// answer (or the error) is returned as the call's text.
		id := fmt.Sprintf(`"fx-%s-%s"`, p.Name, strings.Trim(string(m.ID), `"`))
		ch := make(chan msg, 1)
		s.answers.Store(id, ch)
		method, params := "sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"fixture asks"}}],"maxTokens":10}`
		switch p.Name {
		case "elicit":
			method, params = "elicitation/create", `{"message":"fixture asks","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`
		case "sample-cr":
			// Bare CRs, JSON whitespace, which would end an SSE data line.
			params = "{\"messages\":[{\"role\":\"user\",\r\"content\":{\"type\":\"text\",\"text\":\"fixture asks\"}}],\r\"maxTokens\":10}"
		}
		s.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params))
		a := <-ch
		s.answers.Delete(id)
		got := string(a.Result)
		if a.Error != nil {
			got = "error " + string(a.Error)
		}
		text, _ := json.Marshal(got)
		s.result(m.ID, fmt.Sprintf(`{"content":[{"type":"text","text":%s}],"isError":false}`, text))
	case "ask":
		// A 2026-07-28 tool that needs input: it answers input_required
		// (one elicitation, a state), and the retry that carries the
		// answer and that state gets the answer back as text. A retry
		// with another state is asked again. A client that does not
		// declare elicitation is not asked: an isError result says so.
		if p.Meta.ClientCapabilities.Elicitation == nil {
			s.result(m.ID, `{"content":[{"type":"text","text":"the client cannot elicit"}],"isError":true}`)
			return
		}
		if p.RequestState == nil || *p.RequestState != "ask-state-1" || p.InputResponses == nil {
			s.result(m.ID, `{"resultType":"input_required","inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"fixture asks","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}}},"requestState":"ask-state-1"}`)
			return
		}
		var r map[string]json.RawMessage
		json.Unmarshal(p.InputResponses, &r)
		text, _ := json.Marshal("answered " + string(r["confirm"]))
		s.result(m.ID, fmt.Sprintf(`{"content":[{"type":"text","text":%s}],"isError":false}`, text))
	case "ask-forever":
		// Input required, whatever the retry brings.
		s.result(m.ID, `{"resultType":"input_required","inputRequests":{"again":{"method":"elicitation/create","params":{"message":"again","requestedSchema":{"type":"object","properties":{}}}}},"requestState":"x"}`)
	case "flood":
		// Thousands of large log messages, as fast as they are read.
		line := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"flood","data":"` + strings.Repeat("x", 16<<10) + `"}}`
		for range 4000 {
			s.write(line)
		}
		echo()
	case "log":
		s.write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"work","data":"fixture log line"}}`)
		echo()
	case "touch":
		// Every followed resource was updated: each subscription hears
		// of its own URIs.
		s.mu.Lock()
		var lines []string
		for uri := range s.followed {
			u, _ := json.Marshal(uri)
			lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":%s}}`, u))
		}
		for id, uris := range s.resListens {
			for _, uri := range uris {
				u, _ := json.Marshal(uri)
				lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":%s,"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, u, id))
			}
		}
		s.mu.Unlock()
		for _, l := range lines {
			s.write(l)
		}
		echo()
	case "embed":
		s.result(m.ID, `{"content":[`+embedded()+`],"isError":false}`)
	case "whoami":
		b, _ := json.Marshal(map[string]string{"name": s.name})
		s.result(m.ID, fmt.Sprintf(`{"content":[{"type":"text","text":%q}],"structuredContent":%s,"isError":false}`, b, b))
	default:
		echo()
	}
}

// listChanged tells the client the list changed: unasked in the legacy
// era, on each open subscriptions/listen in the modern one.
func (s *server) listChanged() {
	s.mu.Lock()
	subs := append([]string(nil), s.subs...)
	s.mu.Unlock()
	if !s.modern && s.res != "" {
		s.write(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
	}
	if !s.modern && s.prompts != "" {
		s.write(`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`)
	} else if !s.modern {
		s.write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	}
	for _, id := range subs {
		s.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}`, id))
	}
}
