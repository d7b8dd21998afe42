package policy

import (
	"strings"
	"testing"
)

// seedRules are seed 002's rule as data (admin_* is for admins), a
// conditioned refund rule, and everything else forwarded.
var seedRules = []Rule{
	{ID: "admin-tools", Tools: []string{"*.admin_*"}, Roles: []string{"admin"}},
	{ID: "refunds-small", Tools: []string{"refund.trigger_refund"}, Roles: []string{"support"}, When: "double(args.amount) <= 500.0"},
	{ID: "refunds", Tools: []string{"refund.trigger_refund"}, Roles: []string{"finance", "admin"}},
	{ID: "everyone-else", Tools: []string{"*"}, Roles: []string{"*"}},
}

func mustCompile(t testing.TB, rules []Rule) *Policy {
	t.Helper()
	p, err := Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	pol := mustCompile(t, seedRules)
	viewer := Principal{Subject: "bob", Roles: []string{"viewer"}}
	admin := Principal{Subject: "alice", Roles: []string{"viewer", "admin"}}
	support := Principal{Subject: "sam", Roles: []string{"support"}}
	finance := Principal{Subject: "fin", Roles: []string{"finance"}}
	call := func(q string, args map[string]any) Call {
		server, name, _ := strings.Cut(q, ".")
		return Call{Qualified: q, Server: server, Name: name, Args: args}
	}
	for _, tc := range []struct {
		name      string
		p         Principal
		c         Call
		allow     bool
		needsArgs bool
		rule      string
		reason    string
	}{
		{"viewer refused an admin tool", viewer, call("refund.admin_reset_key", nil), false, false, "admin-tools", ReasonRole},
		{"the pattern ignores case", viewer, call("Refund.ADMIN_reset_key", nil), false, false, "admin-tools", ReasonRole},
		{"admin (one of several roles) allowed", admin, call("refund.admin_reset_key", nil), true, false, "admin-tools", ""},
		{"viewer allowed the rest", viewer, call("refund.get_customer_record", nil), true, false, "everyone-else", ""},
		{"a later broad rule never widens an earlier one", viewer, call("db.admin_x", nil), false, false, "admin-tools", ReasonRole},
		{"a condition waits for the arguments", support, call("refund.trigger_refund", nil), false, true, "refunds-small", ""},
		{"a small refund for support", support, call("refund.trigger_refund", map[string]any{"amount": 120.0}), true, false, "refunds-small", ""},
		{"a large refund denied for support", support, call("refund.trigger_refund", map[string]any{"amount": 5000.0}), false, false, "refunds-small", ReasonCondition},
		{"an absent field denies", support, call("refund.trigger_refund", map[string]any{}), false, false, "refunds-small", ReasonCondition},
		{"a wrong type denies", support, call("refund.trigger_refund", map[string]any{"amount": "lots"}), false, false, "refunds-small", ReasonCondition},
		// The first matching rule decides even when it refuses: finance is
		// not among refunds-small's roles, so the broader refunds rule
		// below it is never reached.
		{"the first matching rule decides", finance, call("refund.trigger_refund", map[string]any{"amount": 5000.0}), false, false, "refunds-small", ReasonRole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := pol.Decide(tc.p, tc.c)
			if d.Allow != tc.allow || d.NeedsArgs != tc.needsArgs || d.Rule != tc.rule || d.Reason != tc.reason {
				t.Errorf("Decide = %+v, want allow=%v needsArgs=%v rule=%q reason=%q", d, tc.allow, tc.needsArgs, tc.rule, tc.reason)
			}
		})
	}
}

func TestNoRuleDenies(t *testing.T) {
	pol := mustCompile(t, []Rule{{ID: "only", Tools: []string{"a.b"}, Roles: []string{"*"}}})
	if d := pol.Decide(Principal{Roles: []string{"admin"}}, Call{Qualified: "a.c"}); d.Allow || d.Reason != ReasonNoRule || d.Rule != "" {
		t.Errorf("%+v", d)
	}
	empty := mustCompile(t, nil)
	if d := empty.Decide(Principal{Roles: []string{"admin"}}, Call{Qualified: "a.b"}); d.Allow {
		t.Errorf("an empty policy allowed: %+v", d)
	}
}

func TestConditionsSeePrincipalAndTool(t *testing.T) {
	pol := mustCompile(t, []Rule{{ID: "own", Tools: []string{"*"}, Roles: []string{"*"},
		When: `args.customer == principal.subject && tool.server == "refund" && principal.claims.tier == "gold" && tool.annotations.readOnlyHint == true`}})
	p := Principal{Subject: "c-1", Roles: []string{"customer"}, Claims: map[string]any{"tier": "gold"}}
	c := Call{Qualified: "refund.get", Server: "refund", Name: "get", Annotations: map[string]any{"readOnlyHint": true}, Args: map[string]any{"customer": "c-1"}}
	if d := pol.Decide(p, c); !d.Allow {
		t.Errorf("%+v", d)
	}
	c.Args = map[string]any{"customer": "c-2"}
	if d := pol.Decide(p, c); d.Allow {
		t.Errorf("another customer's record: %+v", d)
	}
}

// TestConditionsSeeTheIssuer: subjects are only unique per issuer, so a
// condition can name the issuer with the subject, and a subject of the
// same name from another issuer is refused.
func TestConditionsSeeTheIssuer(t *testing.T) {
	pol := mustCompile(t, []Rule{{ID: "svc", Tools: []string{"*"}, Roles: []string{"*"},
		When: `principal.issuer == "static" && principal.subject == "svc-payments"`}})
	c := Call{Qualified: "pay.run", Server: "pay", Name: "run", Args: map[string]any{}}
	if d := pol.Decide(Principal{Subject: "svc-payments", Issuer: "static", Roles: []string{"svc"}}, c); !d.Allow {
		t.Errorf("the configured token's subject: %+v", d)
	}
	if d := pol.Decide(Principal{Subject: "svc-payments", Issuer: "https://idp.example", Roles: []string{"viewer"}}, c); d.Allow {
		t.Errorf("the same subject from an identity provider: %+v", d)
	}
}

func TestListable(t *testing.T) {
	pol := mustCompile(t, seedRules)
	viewer := Principal{Roles: []string{"viewer"}}
	support := Principal{Roles: []string{"support"}}
	for _, tc := range []struct {
		p    Principal
		tool string
		want bool
	}{
		{viewer, "refund.admin_reset_key", false},
		{viewer, "refund.get_customer_record", true},
		{support, "refund.trigger_refund", true}, // a condition may still refuse the call
		{viewer, "refund.trigger_refund", false},
	} {
		if got := pol.Listable(tc.p, tc.tool); got != tc.want {
			t.Errorf("Listable(%v, %s) = %v", tc.p.Roles, tc.tool, got)
		}
	}
}

func TestCompileErrorsNameTheRule(t *testing.T) {
	for _, tc := range []struct {
		rules []Rule
		want  string
	}{
		{[]Rule{{ID: "bad-cel", Tools: []string{"*"}, Roles: []string{"*"}, When: "args.amount <="}}, `rule "bad-cel": when:`},
		{[]Rule{{ID: "not-bool", Tools: []string{"*"}, Roles: []string{"*"}, When: `"yes"`}}, `rule "not-bool": when: the condition is of type string`},
		{[]Rule{{ID: "undeclared", Tools: []string{"*"}, Roles: []string{"*"}, When: "secret == 1"}}, `rule "undeclared": when:`},
		{[]Rule{{ID: "a", Tools: []string{"*"}, Roles: []string{"*"}}, {ID: "a", Tools: []string{"*"}, Roles: []string{"*"}}}, `rule "a": the id is used`},
		{[]Rule{{Tools: []string{"*"}, Roles: []string{"*"}}}, "rule 0: id must be"},
		{[]Rule{{ID: "r", Roles: []string{"*"}}}, `rule "r": tools, prompts or resources must`},
		{[]Rule{{ID: "r", Tools: []string{"*"}}}, `rule "r": roles must`},
		{[]Rule{{ID: "r", Tools: []string{"*"}, Roles: []string{"a,b"}}}, `rule "r": role "a,b"`},
		{[]Rule{{ID: "r", Tools: []string{" x"}, Roles: []string{"*"}}}, `rule "r": a tool pattern`},
		{[]Rule{{ID: "typo", Tools: []string{"*"}, Roles: []string{"*"}, When: `'admin' in principal.rolez || true`}}, `rule "typo": when: principal has no member "rolez"`},
		{[]Rule{{ID: "typo", Tools: []string{"*"}, Roles: []string{"*"}, When: `tool.nmae == "x"`}}, `rule "typo": when: tool has no member "nmae"`},
		{[]Rule{{ID: "typo", Tools: []string{"*"}, Roles: []string{"*"}, When: `principal["subjet"] == "x"`}}, `rule "typo": when: principal has no member "subjet"`},
		{[]Rule{{ID: "typo", Tools: []string{"*"}, Roles: []string{"*"}, When: `has(tool.annotation.x)`}}, `rule "typo": when: tool has no member "annotation"`},
	} {
		_, err := Compile(tc.rules)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%+v) = %v, want %q", tc.rules, err, tc.want)
		}
	}
}

// TestConditionMembers: a condition may name every member of principal
// and tool, any member of their claims and annotations, and any argument.
func TestConditionMembers(t *testing.T) {
	for _, when := range []string{
		`principal.subject != "" && principal.issuer != "" && size(principal.roles) >= 0 && principal.claims.x == 1`,
		`tool.kind == "tool" && tool.qualified != "" && tool.server != "" && tool.name != "" && tool.annotations.y == true`,
		`has(principal.claims.tier) && principal["roles"] != [] && args.anything == 1 && args["rolez"] == 2`,
		`[1].exists(x, x == 1)`,
	} {
		if _, err := Compile([]Rule{{ID: "r", Tools: []string{"*"}, Roles: []string{"*"}, When: when}}); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
}

// TestConditionFault: a condition that cannot be decided denies, and says
// why without quoting what the evaluation said.
func TestConditionFault(t *testing.T) {
	pol, err := Compile([]Rule{
		{ID: "missing", Tools: []string{"s.missing"}, Roles: []string{"*"}, When: `args.amount <= 100.0`},
		{ID: "number", Tools: []string{"s.number"}, Roles: []string{"*"}, When: `args.amount`},
		{ID: "false", Tools: []string{"s.false"}, Roles: []string{"*"}, When: `args.amount <= 100.0`},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{Subject: "u", Roles: []string{"r"}}
	for _, tc := range []struct {
		name  string
		args  map[string]any
		fault string
	}{
		{"s.missing", map[string]any{"other": "secret-value"}, "an error"},
		{"s.number", map[string]any{"amount": 5.0}, "not a boolean"},
		{"s.false", map[string]any{"amount": 500.0}, ""},
	} {
		d := pol.Decide(p, Call{Kind: KindTool, Qualified: tc.name, Args: tc.args})
		if d.Allow || d.Reason != ReasonCondition || d.Fault != tc.fault {
			t.Errorf("%s: %+v, want a denial for its condition with fault %q", tc.name, d, tc.fault)
		}
	}
	if d := pol.Decide(p, Call{Kind: KindTool, Qualified: "s.false", Args: map[string]any{"amount": 5.0}}); !d.Allow || d.Reason != "" || d.Fault != "" {
		t.Errorf("a condition that holds: %+v", d)
	}
}

// TestDecidePrompts: prompt patterns decide prompts and tool patterns
// tools, never across — a rule naming only tools grants no prompt of the
// same name, and "*" in tools does not reach prompts.
func TestDecidePrompts(t *testing.T) {
	pol := mustCompile(t, []Rule{
		{ID: "docs-prompts", Prompts: []string{"docs.*"}, Roles: []string{"writer"}},
		{ID: "all-tools", Tools: []string{"*"}, Roles: []string{"*"}},
		{ID: "both", Tools: []string{"mix.t"}, Prompts: []string{"mix.p"}, Roles: []string{"viewer"}},
	})
	writer := Principal{Subject: "w", Roles: []string{"writer"}}
	viewer := Principal{Subject: "v", Roles: []string{"viewer"}}
	prompt := func(q string) Call { return Call{Kind: KindPrompt, Qualified: q} }
	for _, tc := range []struct {
		name   string
		p      Principal
		c      Call
		allow  bool
		rule   string
		reason string
	}{
		{"a prompt rule grants its role", writer, prompt("docs.summarize"), true, "docs-prompts", ""},
		{"and refuses another", viewer, prompt("docs.summarize"), false, "docs-prompts", ReasonRole},
		{"a tool rule never grants a prompt", viewer, prompt("db.summarize"), false, "", ReasonNoRule},
		{"a prompt rule never decides a tool", writer, Call{Qualified: "docs.summarize"}, true, "all-tools", ""},
		{"one rule, both kinds: the prompt", viewer, prompt("mix.p"), true, "both", ""},
		{"one rule, both kinds: not the tool's name as a prompt", viewer, prompt("mix.t"), false, "", ReasonNoRule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := pol.Decide(tc.p, tc.c)
			if d.Allow != tc.allow || d.Rule != tc.rule || d.Reason != tc.reason {
				t.Errorf("Decide = %+v, want allow=%v rule=%q reason=%q", d, tc.allow, tc.rule, tc.reason)
			}
		})
	}
	if !pol.ListableKind(writer, KindPrompt, "docs.x") || pol.ListableKind(viewer, KindPrompt, "docs.x") || pol.ListableKind(viewer, KindPrompt, "db.x") {
		t.Error("ListableKind disagrees with Decide")
	}
}

// TestDecideResources: resource patterns are <server>:<uri>, matched with
// case, "*" crossing "/"; they decide reads only.
func TestDecideResources(t *testing.T) {
	pol := mustCompile(t, []Rule{
		{ID: "secret", Resources: []string{"docs:file:///srv/docs/secret/*"}, Roles: []string{"admin"}},
		{ID: "docs", Resources: []string{"docs:file:///srv/docs/*"}, Roles: []string{"*"}},
		{ID: "tools", Tools: []string{"*"}, Roles: []string{"*"}},
	})
	viewer := Principal{Subject: "v", Roles: []string{"viewer"}}
	read := func(s string) Call { return Call{Kind: KindResource, Qualified: s} }
	for _, tc := range []struct {
		c      Call
		allow  bool
		rule   string
		reason string
	}{
		{read("docs:file:///srv/docs/a/b.md"), true, "docs", ""},
		{read("docs:file:///srv/docs/secret/k.md"), false, "secret", ReasonRole},
		{read("docs:file:///srv/docs/SECRET/k.md"), true, "docs", ""}, // a URI's case is its own
		{read("other:file:///srv/docs/a.md"), false, "", ReasonNoRule},
		{read("docs:file:///etc/passwd"), false, "", ReasonNoRule},
	} {
		d := pol.Decide(viewer, tc.c)
		if d.Allow != tc.allow || d.Rule != tc.rule || d.Reason != tc.reason {
			t.Errorf("%s: %+v, want allow=%v rule=%q reason=%q", tc.c.Qualified, d, tc.allow, tc.rule, tc.reason)
		}
	}
	if _, err := Compile([]Rule{{ID: "x", Resources: []string{"file:///a"}, Roles: []string{"*"}}}); err != nil {
		t.Errorf("a pattern with a scheme and no server: %v", err)
	}
	if _, err := Compile([]Rule{{ID: "x", Resources: []string{"nocolon"}, Roles: []string{"*"}}}); err == nil {
		t.Error("a resource pattern without a server was accepted")
	}
	// A carve-out whose server half is not lower case would match no
	// server, and the broader rule after it would decide.
	if _, err := Compile([]Rule{{ID: "x", Resources: []string{"Docs:file:///srv/docs/private/*"}, Roles: []string{"admin"}}}); err == nil {
		t.Error("a resource pattern whose server half is not in lower case was accepted")
	}
}
