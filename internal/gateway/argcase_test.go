package gateway

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// TestCaseVariant: a member the input schema does not declare, whose name
// folds (as encoding/json folds) to one it declares, is found at every
// level the schema describes; declared names, values and members of
// levels the schema says nothing of are left alone.
func TestCaseVariant(t *testing.T) {
	const (
		flat   = `{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}`
		nested = `{"type":"object","properties":{"mail":{"type":"object","properties":{"to":{"type":"string"}}}}}`
	)
	for _, tc := range []struct {
		schema, args string
		given        string // "" for none
	}{
		{flat, `{"TO":"x"}`, "TO"},
		{flat, `{"To":"x","body":"b"}`, "To"},
		{flat, `{"to":"x","body":"b"}`, ""},
		{flat, `{"other":"x"}`, ""},
		{flat, `{"to":"TO","body":"To"}`, ""},                                          // values are not names
		{flat, `{"bodY":"x"}`, "bodY"},                                                 // any declared name
		{`{"type":"object","properties":{"kind":{}}}`, `{"\u212aind":1}`, "\u212aind"}, // Kelvin sign K
		{`{"type":"object","properties":{"cost":{}}}`, `{"co\u017ft":1}`, "co\u017ft"}, // long s ſ
		{`{"type":"object","properties":{"id":{}}}`, `{"\u0131d":1}`, "\u0131d"},       // dotless ı, as encoding/json folds it
		{`{"type":"object","properties":{"to":{},"To":{}}}`, `{"To":1}`, ""},           // declared exactly
		{nested, `{"mail":{"TO":"x"}}`, "TO"},
		{nested, `{"mail":{"to":"x"}}`, ""},
		{nested, `{"other":{"TO":"x"}}`, ""}, // a level the schema says nothing of
		{`{"type":"object","properties":{"mails":{"type":"array","items":{"type":"object","properties":{"to":{}}}}}}`,
			`{"mails":[{"to":"a"},{"tO":"b"}]}`, "tO"},
		{`{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"object","properties":{"to":{}}}]}}}`,
			`{"pair":["TO",{"TO":1}]}`, "TO"},
		{`{"type":"object","$defs":{"m":{"type":"object","properties":{"to":{}}}},"properties":{"mail":{"$ref":"#/$defs/m"}}}`,
			`{"mail":{"To":1}}`, "To"},
		{`{"type":"object","$defs":{"node":{"type":"object","properties":{"to":{},"next":{"$ref":"#/$defs/node"}}}},"properties":{"head":{"$ref":"#/$defs/node"}}}`,
			`{"head":{"next":{"next":{"TO":1}}}}`, "TO"}, // a cycle of references
		{`{"type":"object","allOf":[{"properties":{"to":{}}}]}`, `{"TO":1}`, "TO"},
		{`{"type":"object","anyOf":[{"properties":{"to":{}}},{"properties":{"TO":{}}}]}`, `{"TO":1}`, ""}, // declared by an alternative
		{`{"type":"object","anyOf":[{"properties":{"to":{}}},{"properties":{"cc":{}}}]}`, `{"CC":1}`, "CC"},
		{`{"type":"object","if":{"properties":{"a":{}}},"then":{"properties":{"to":{}}}}`, `{"To":1}`, "To"},
		{`{"type":"object","additionalProperties":{"type":"object","properties":{"to":{}}}}`, `{"x":{"To":1}}`, "To"},
		{`{"type":"object","patternProperties":{"^m":{"type":"object","properties":{"to":{}}}}}`, `{"m1":{"To":1}}`, "To"},
		{`{"type":"object"}`, `{"TO":1}`, ""},
		// Dashes and underscores, which json/v2's case:ignore drops.
		{`{"type":"object","properties":{"amount":{"maximum":100}}}`, `{"amo-unt":1000000}`, "amo-unt"},
		{`{"type":"object","properties":{"amount":{}}}`, `{"A_MOUNT":1}`, "A_MOUNT"},
		{`{"type":"object","properties":{"user_id":{}}}`, `{"userId":1}`, "userId"},
		{`{"type":"object","properties":{"user_id":{},"user-id":{}}}`, `{"user-id":1,"user_id":2}`, ""}, // both declared exactly
	} {
		g := pinned(t)
		if err := g.catalog.Update(catalog.Server{Name: "s"}, []jsontext.Value{jsontext.Value(`{"name":"t","inputSchema":` + tc.schema + `}`)}); err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		tl, ok := g.catalog.Snapshot().Lookup("s.t")
		if !ok {
			t.Fatalf("%s: not admitted", tc.schema)
		}
		given, declared, found := caseVariant(tl.Input, jsontext.Value(tc.args))
		if given != tc.given || found != (tc.given != "") || (found && variantFold(declared) != variantFold(given)) {
			t.Errorf("caseVariant(%s, %s) = %q, %q, %v; want %q", tc.schema, tc.args, given, declared, found, tc.given)
		}
	}
}

// TestDecideRefusesCaseVariant: an argument named as a declared one but
// for case is refused as invalid arguments under a rule with a condition
// — whose !has(args.to) it would otherwise pass — and under one without,
// and audited as invalid, never allowed.
func TestDecideRefusesCaseVariant(t *testing.T) {
	cat := pinned(t).catalog
	if err := cat.Update(catalog.Server{Name: "s"}, []jsontext.Value{jsontext.Value(
		`{"name":"mail","inputSchema":{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}}`)}); err != nil {
		t.Fatal(err)
	}
	tl, _ := cat.Snapshot().Lookup("s.mail")
	for _, rule := range []policy.Rule{
		{ID: "no-recipient", Tools: []string{"*"}, Roles: []string{"*"}, When: "!has(args.to)"},
		{ID: "plain", Tools: []string{"*"}, Roles: []string{"*"}},
	} {
		pol, err := policy.Compile([]policy.Rule{rule})
		if err != nil {
			t.Fatal(err)
		}
		g := &Gateway{catalog: cat, servers: map[string]*downstream{}, policy: pol, audit: audit.New(io.Discard)}
		for _, args := range []string{`{"TO":"x@example.com","body":"b"}`, `{"body":"b","tO":"x@example.com"}`} {
			d, err := g.decide(Call{Name: "s.mail", Arguments: jsontext.Value(args)}, tl)
			var ae *tool.ArgumentError
			if !errors.As(err, &ae) || !strings.Contains(ae.Problem.Detail, "differs only in case") {
				t.Errorf("%s, %s: %+v, %v; want an argument error", rule.ID, args, d, err)
			}
		}
		if d, err := g.decide(Call{Name: "s.mail", Arguments: jsontext.Value(`{"body":"b"}`)}, tl); err != nil || !d.Allow {
			t.Errorf("%s: a call without a recipient: %+v, %v", rule.ID, d, err)
		}
	}
	var log strings.Builder
	pol, _ := policy.Compile([]policy.Rule{{ID: "no-recipient", Tools: []string{"*"}, Roles: []string{"*"}, When: "!has(args.to)"}})
	g := &Gateway{catalog: cat, servers: map[string]*downstream{}, policy: pol, audit: audit.New(&log)}
	_, err := g.Invoke(t.Context(), Call{Name: "s.mail", Arguments: jsontext.Value(`{"TO":"x@example.com"}`)})
	var ae *tool.ArgumentError
	if !errors.As(err, &ae) || !strings.Contains(log.String(), `"outcome":"invalid"`) || !strings.Contains(log.String(), `"reason":"arguments"`) {
		t.Errorf("Invoke: %v, audited %s", err, log.String())
	}
}
