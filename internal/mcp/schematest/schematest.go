// Package schematest gives tests the official MCP JSON schemas, which live
// beside the clone (../shared/reference/mcp-schema) and are not part of the
// product. Outside CI a missing copy skips the test that asked; in CI
// (CI=true) it fails it, so conformance is never skipped silently there.
//
// It is for tests only.
package schematest

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Dir returns the directory holding <version>/schema.json, found by walking
// up from the working directory to the module root.
func Dir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "..", "shared", "reference", "mcp-schema")
		}
		if filepath.Dir(d) == d {
			t.Fatal("schematest: no go.mod above the working directory")
		}
	}
}

type key struct{ version, def string }

var (
	mu    sync.Mutex
	cache = map[key]*jsonschema.Schema{}
)

// Definition compiles definition def of the official schema of version.
func Definition(t testing.TB, version, def string) *jsonschema.Schema {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if s, ok := cache[key{version, def}]; ok {
		return s
	}
	f, err := os.Open(filepath.Join(Dir(t), version, "schema.json"))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("official MCP schema missing in CI: %v", err)
		}
		t.Skipf("official MCP schemas not beside the clone (%v); CI always has them", err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	url := "urn:mcp:schema:" + version
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	defs := "definitions"
	if _, ok := doc.(map[string]any)["$defs"]; ok {
		defs = "$defs"
	}
	s, err := c.Compile(url + "#/" + defs + "/" + def)
	if err != nil {
		t.Fatalf("compile %s %s: %v", version, def, err)
	}
	cache[key{version, def}] = s
	return s
}

// Validate reports through t whether raw validates against definition def
// of the official schema of version.
func Validate(t testing.TB, version, def string, raw []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if err := Definition(t, version, def).Validate(inst); err != nil {
		t.Errorf("%s %s: %s\ndoes not validate: %v", version, def, raw, err)
	}
}
