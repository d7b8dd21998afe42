package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// The placeholders of the README's client examples: the only values the
// test replaces with its own.
const (
	readmeBinary  = "/opt/bastion/bin/bastion"
	readmeDataDir = "/srv/reports"
	readmeDSN     = "postgres://bastion_reader@db.internal:5432/app?sslmode=verify-full"
)

// readmeServer is one stdio server entry of a client configuration.
type readmeServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	EnvFile string            `json:"envFile"`
}

// TestREADMEClientExamples starts `bastion serve` exactly as each client
// configuration in the README says — its command, arguments, environment
// and env file, with the client's own interpolation — and checks that a
// session gets all three tools and that each works. Only the binary's
// path, the data directory and the DSN are replaced, by the test's own.
func TestREADMEClientExamples(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	i := strings.Index(section, "## Using it from an MCP client")
	j := strings.Index(section, "## Configuration")
	if i < 0 || j < i {
		t.Fatal("README.md has no section \"Using it from an MCP client\" before \"Configuration\"")
	}
	section = section[i:j]

	db := pgtest.NewSampleDB(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "q3.md"), []byte("# Q3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	replace := strings.NewReplacer(readmeBinary, bin("bastion"), readmeDataDir, data, readmeDSN, db.DSN())

	for _, client := range []struct {
		heading, key string
		clientEnv    map[string]string // the environment the client itself runs in
	}{
		{"**Claude Desktop**", "mcpServers", nil},
		{"**VS Code**", "servers", nil},
		{"**Cursor**", "mcpServers", map[string]string{"BASTION_SQL_DSN": db.DSN()}},
	} {
		t.Run(strings.Trim(client.heading, "*"), func(t *testing.T) {
			blocks := codeBlocks(section, client.heading)
			if len(blocks) == 0 || blocks[0].lang != "json" {
				t.Fatalf("no JSON block after %s", client.heading)
			}
			for _, want := range []string{readmeBinary} {
				if !strings.Contains(blocks[0].text, want) {
					t.Fatalf("the %s example does not use the placeholder %q", client.heading, want)
				}
			}
			var cfg map[string]map[string]readmeServer
			if err := json.Unmarshal([]byte(blocks[0].text), &cfg); err != nil {
				t.Fatalf("the %s example is not JSON: %v", client.heading, err)
			}
			srv, ok := cfg[client.key]["bastion"]
			if !ok {
				t.Fatalf("the %s example has no %s.bastion", client.heading, client.key)
			}
			if srv.Command != readmeBinary || !slices.Equal(srv.Args, []string{"serve"}) {
				t.Fatalf("%s: command %q args %q", client.heading, srv.Command, srv.Args)
			}
			interpolate := func(s string) string {
				s = strings.ReplaceAll(s, "${userHome}", home)
				s = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}`).ReplaceAllStringFunc(s, func(m string) string {
					name := m[len("${env:") : len(m)-1]
					v, ok := client.clientEnv[name]
					if !ok {
						t.Fatalf("%s: ${env:%s} is not set in the client's environment the README describes", client.heading, name)
					}
					return v
				})
				return replace.Replace(s)
			}
			env := map[string]string{}
			if srv.EnvFile != "" {
				if len(blocks) < 2 || blocks[1].lang != "sh" {
					t.Fatalf("%s: envFile %q but no file contents shown after it", client.heading, srv.EnvFile)
				}
				path := interpolate(srv.EnvFile)
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(blocks[1].text), 0o600); err != nil {
					t.Fatal(err)
				}
				for k, v := range readEnvFile(t, path) {
					env[k] = interpolate(v)
				}
			}
			for k, v := range srv.Env {
				env[k] = interpolate(v)
			}
			for _, name := range []string{"MCP_SAFE_DATA_DIR", "MCP_SQL_DSN"} {
				if env[name] == "" {
					t.Fatalf("%s: the example does not set %s", client.heading, name)
				}
			}
			if env["MCP_SQL_DSN"] != db.DSN() || env["MCP_SAFE_DATA_DIR"] != data {
				t.Fatalf("%s: the example's DSN or data directory is not the documented placeholder", client.heading)
			}
			environ := baseEnv()
			for k, v := range env {
				environ = append(environ, k+"="+v)
			}
			p := serve(t, environ...)
			if m := p.initialize("2025-11-25"); m["result"] == nil {
				t.Fatalf("initialize: %v", m)
			}
			p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
			var names []string
			if res, ok := p.recv()["result"].(map[string]any); ok {
				tools, _ := res["tools"].([]any)
				for _, tool := range tools {
					names = append(names, tool.(map[string]any)["name"].(string))
				}
			}
			for _, want := range []string{"read_only_sql", "sandbox_fs_read", "system_metrics"} {
				if !slices.Contains(names, want) {
					t.Errorf("%s: tools/list = %q, want %s", client.heading, names, want)
				}
			}
			for id, c := range []struct {
				name string
				args map[string]any
			}{
				{"read_only_sql", map[string]any{"query": "SELECT count(*) AS n FROM reporting.customers"}},
				{"sandbox_fs_read", map[string]any{"relative_path": "q3.md"}},
				{"system_metrics", map[string]any{}},
			} {
				p.call(10+id, c.name, c.args)
				res, _ := p.recv()["result"].(map[string]any)
				if res == nil || res["isError"] == true {
					t.Errorf("%s: %s: %v", client.heading, c.name, res)
				}
			}
			p.closeStdin()
			if code := p.wait(); code != 0 {
				t.Errorf("%s: exit %d: %s", client.heading, code, p.stderr.String())
			}
		})
	}
}

type codeBlock struct{ lang, text string }

// codeBlocks returns the fenced code blocks after the line that starts
// with heading, up to the next such paragraph heading ("**…**").
func codeBlocks(section, heading string) []codeBlock {
	i := strings.Index(section, "\n"+heading)
	if i < 0 {
		return nil
	}
	rest := section[i+1+len(heading):]
	if k := strings.Index(rest, "\n**"); k >= 0 {
		rest = rest[:k]
	}
	var out []codeBlock
	for {
		k := strings.Index(rest, "```")
		if k < 0 {
			return out
		}
		rest = rest[k+3:]
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			return out
		}
		lang := rest[:nl]
		rest = rest[nl+1:]
		end := strings.Index(rest, "```")
		if end < 0 {
			return out
		}
		out = append(out, codeBlock{lang: lang, text: rest[:end]})
		rest = rest[end+3:]
	}
}

// readEnvFile reads KEY=VALUE lines, as VS Code's envFile does (blank
// lines and # comments skipped).
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("env file line %q is not KEY=VALUE", line)
		}
		env[k] = v
	}
	return env
}
