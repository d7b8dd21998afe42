// Package policy decides which caller may call which tool or get which
// prompt. It is pure: a
// [Policy] is compiled once from data rules at start-up, and
// [Policy.Decide] reads nothing but its arguments — no clock, no network,
// no files — so every rule can be table-tested without a server, and
// reading this package tells exactly which calls reach a downstream.
//
// Matching (GATEWAY.md decision 12): a rule's tool patterns match the
// whole qualified name without regard to case, `*` being the only
// wildcard (it crosses dots). The first rule whose pattern matches
// decides: the call is allowed only if the caller holds one of the rule's
// roles ("*" is any authenticated caller) and the rule's condition, when
// it has one, holds. A later, broader rule can never widen an earlier,
// narrower one, and a call no rule matches is denied. A rule's prompt
// patterns decide prompts/get the same way (docs/gateway-surface.md
// decision 18), and only them: a rule's tool patterns never match a
// prompt, nor its prompt patterns a tool.
package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/mcp-bastion/bastion/internal/glob"
)

// Rule is one rule of the configuration.
type Rule struct {
	// ID names the rule in decisions, the audit and errors.
	ID string
	// Tools are patterns over qualified tool names.
	Tools []string
	// Prompts are patterns over qualified prompt names.
	Prompts []string
	// Resources are patterns <server pattern>:<URI pattern>, split at
	// the first ':'; the server pattern matches the server name and the
	// URI pattern the URI, each on its own (a `*` never crosses the
	// ':'), with case: a URI's case is its own.
	Resources []string
	// Roles may call what the rule matches; "*" is any caller.
	Roles []string
	// When is an optional CEL condition over principal, tool and args.
	When string
}

// Principal is who calls, as authentication established it.
type Principal struct {
	Subject string
	// Issuer is who vouched for the subject ("static", a JWT issuer,
	// "stdio", "none"): subjects are only unique per issuer, so a
	// condition naming a subject should name its issuer too.
	Issuer string
	Roles  []string
	// Claims are a JWT's claims (nil for a static token), for conditions.
	Claims map[string]any
}

// Kinds of what a Call names.
const (
	KindTool     = ""
	KindPrompt   = "prompt"
	KindResource = "resource"
)

// Call is what is decided: a call of one tool, or a get of one prompt.
type Call struct {
	// Kind is KindTool or KindPrompt.
	Kind string
	// Qualified is the public name <server>.<tool>; Server and Name its
	// parts (the downstream's own name).
	Qualified, Server, Name string
	// Annotations are the tool's annotations, for conditions.
	Annotations map[string]any
	// Args are the call's arguments, already checked against the tool's
	// input schema (a prompt's, against its declared arguments); nil
	// before they are (see Decide).
	Args map[string]any
}

// Decision is the verdict on one call.
type Decision struct {
	// Allow is the verdict.
	Allow bool
	// NeedsArgs: the deciding rule grants the caller's role but has a
	// condition, which is only evaluated on checked arguments; decide
	// again with Call.Args set. Allow is false until then.
	NeedsArgs bool
	// Rule is the deciding rule's id; "" when no rule matched.
	Rule string
	// Required are the deciding rule's roles.
	Required []string
	// Reason says why a call was denied: "no_rule", "role" or
	// "condition" (false, an error, or not a boolean).
	Reason string
	// Fault says why the condition could not be decided, "" when it
	// could: "an error" or "not a boolean". Such a call is denied; the
	// gateway logs it, since a condition that fails on every call is a
	// mistake in the rule. It never quotes the evaluation's message,
	// which may hold argument values.
	Fault string
	// Literal: the deciding rule named the resource's URI itself, with
	// no wildcard — a decision no other reading of the URI overrides.
	Literal bool
}

// Reasons a call is denied.
const (
	ReasonNoRule    = "no_rule"
	ReasonRole      = "role"
	ReasonCondition = "condition"
)

// Policy is a compiled rule set. It is immutable and safe for concurrent
// use; a nil *Policy denies every call.
type Policy struct {
	rules []compiled
}

// resourcePattern is a resource pattern split at its first ':': the
// server half is matched against the server name alone and the URI half
// against the URI alone, so that a `*` in one half never crosses into the
// other (a server name holds no ':').
type resourcePattern struct{ server, uri string }

type compiled struct {
	Rule
	patterns []string // lower-cased tool patterns
	prompts  []string // lower-cased prompt patterns
	resource []resourcePattern
	anyRole  bool
	roles    map[string]bool
	when     cel.Program
}

// roleSyntax is what a role may look like (GATEWAY.md's error table): the
// comma that joins several roles in X-MCP-Gateway-Role never occurs in one.
var roleSyntax = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// ValidRole reports whether r is a well-formed role.
func ValidRole(r string) bool { return roleSyntax.MatchString(r) }

var idSyntax = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// costLimit bounds the evaluation of one condition: a condition is data
// from the configuration, but a comprehension over a large argument must
// not hold a call.
const costLimit = 100_000

// RuleError is a rule Compile refused, by its position in the list, so
// that a configuration can say where the rule is.
type RuleError struct {
	Index int
	Err   error
}

func (e *RuleError) Error() string { return e.Err.Error() }

// Unwrap returns the error naming the rule and what is wrong with it.
func (e *RuleError) Unwrap() error { return e.Err }

// Compile checks and compiles rules. Every error names the rule (by id,
// or by position when it has none) and what is wrong with it, and is a
// *RuleError; a condition that does not parse, does not type-check or is
// not boolean is one.
func Compile(rules []Rule) (*Policy, error) {
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p := &Policy{}
	seen := map[string]bool{}
	for i, r := range rules {
		name := fmt.Sprintf("rule %d", i)
		if r.ID != "" {
			name = fmt.Sprintf("rule %q", r.ID)
		}
		switch {
		case !idSyntax.MatchString(r.ID):
			return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: id must be 1-64 characters of [A-Za-z0-9_.:-]", name)}
		case seen[r.ID]:
			return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: the id is used by another rule", name)}
		case len(r.Tools) == 0 && len(r.Prompts) == 0 && len(r.Resources) == 0:
			return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: tools, prompts or resources must name at least one pattern", name)}
		case len(r.Roles) == 0:
			return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: roles must name at least one role, or \"*\"", name)}
		}
		seen[r.ID] = true
		c := compiled{Rule: r, roles: map[string]bool{}}
		for _, t := range r.Tools {
			if t == "" || strings.TrimSpace(t) != t {
				return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: a tool pattern must be non-empty, without surrounding space", name)}
			}
			c.patterns = append(c.patterns, strings.ToLower(t))
		}
		for _, t := range r.Prompts {
			if t == "" || strings.TrimSpace(t) != t {
				return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: a prompt pattern must be non-empty, without surrounding space", name)}
			}
			c.prompts = append(c.prompts, strings.ToLower(t))
		}
		for _, t := range r.Resources {
			server, uri, ok := strings.Cut(t, ":")
			if t == "" || strings.TrimSpace(t) != t || !ok || server == "" || uri == "" {
				return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: a resource pattern must be <server pattern>:<URI pattern>, without surrounding space", name)}
			}
			if strings.ToLower(server) != server {
				// Server names are lower case: a pattern that is not could
				// never match, and a carve-out that matches nothing lets
				// the broader rule after it decide.
				return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: the server half of a resource pattern must be in lower case, as server names are", name)}
			}
			c.resource = append(c.resource, resourcePattern{server: server, uri: uri})
		}
		for _, role := range r.Roles {
			switch {
			case role == "*":
				c.anyRole = true
			case !ValidRole(role):
				return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: role %q is not 1-64 characters of [A-Za-z0-9_.:-]", name, role)}
			default:
				c.roles[role] = true
			}
		}
		if r.When != "" {
			if c.when, err = compileCondition(env, r.When); err != nil {
				return nil, &RuleError{Index: i, Err: fmt.Errorf("policy: %s: when: %w", name, err)}
			}
		}
		p.rules = append(p.rules, c)
	}
	return p, nil
}

func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("principal", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
	)
}

func compileCondition(env *cel.Env, src string) (cel.Program, error) {
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the condition is of type %s, not bool", t)
	}
	if err := unknownField(ast.NativeRep().Expr()); err != nil {
		return nil, err
	}
	return env.Program(ast, cel.CostLimit(costLimit))
}

// varFields are the members of a condition's principal and tool (as
// Decide makes them). They are declared as maps, so the type check cannot
// tell principal.rolez from principal.roles; a condition that names a
// member they do not have would fail on every call, and is refused here,
// when the policy is compiled, rather than found in production.
var varFields = map[string][]string{
	"principal": {"subject", "issuer", "roles", "claims"},
	"tool":      {"kind", "qualified", "server", "name", "annotations"},
}

// unknownField finds, in a condition, a member of principal or tool
// named by a select (principal.x, has(principal.x)) or by an index with a
// literal string (principal["x"]) that they do not have.
func unknownField(e celast.Expr) error {
	var err error
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if err != nil {
			return
		}
		var operand celast.Expr
		var field string
		switch e.Kind() {
		case celast.SelectKind:
			operand, field = e.AsSelect().Operand(), e.AsSelect().FieldName()
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[1].Kind() != celast.LiteralKind {
				return
			}
			s, ok := c.Args()[1].AsLiteral().(types.String)
			if !ok {
				return
			}
			operand, field = c.Args()[0], string(s)
		default:
			return
		}
		if operand.Kind() != celast.IdentKind {
			return
		}
		if known, ok := varFields[operand.AsIdent()]; ok && !slices.Contains(known, field) {
			err = fmt.Errorf("%s has no member %q (it has %s)", operand.AsIdent(), field, strings.Join(known, ", "))
		}
	}))
	return err
}

// Decide decides c for p. Called with c.Args nil, it decides what the
// principal and the tool alone decide; when the deciding rule has a
// condition and grants the role, the Decision says NeedsArgs, and the
// caller checks the arguments against the tool's schema and decides again
// with them.
func (pol *Policy) Decide(p Principal, c Call) Decision {
	if pol == nil {
		return Decision{Reason: ReasonNoRule}
	}
	r, literal := pol.decidingPattern(c.Kind, c.Qualified)
	if r == nil {
		return Decision{Reason: ReasonNoRule}
	}
	d := Decision{Rule: r.ID, Required: r.Roles, Literal: literal}
	if !r.grants(p.Roles) {
		d.Reason = ReasonRole
		return d
	}
	if r.when == nil {
		d.Allow = true
		return d
	}
	if c.Args == nil {
		d.NeedsArgs = true
		return d
	}
	out, _, err := r.when.Eval(map[string]any{
		"principal": principalVars(p),
		"tool":      map[string]any{"kind": kindName(c.Kind), "qualified": c.Qualified, "server": c.Server, "name": c.Name, "annotations": orEmpty(c.Annotations)},
		"args":      c.Args,
	})
	d.Reason = ReasonCondition
	if err != nil {
		d.Fault = "an error"
		return d
	}
	b, ok := out.Value().(bool)
	if !ok {
		d.Fault = "not a boolean"
		return d
	}
	if b {
		d.Allow, d.Reason = true, ""
	}
	return d
}

// Listable reports whether p may see tool qualified in its tools/list: the
// deciding rule grants one of its roles. A condition is not evaluated (it
// needs a call's arguments), so a tool whose calls a condition may refuse
// is still listed.
func (pol *Policy) Listable(p Principal, qualified string) bool {
	return pol.ListableKind(p, KindTool, qualified)
}

// ListableKind is Listable for a name of kind (KindTool, KindPrompt).
func (pol *Policy) ListableKind(p Principal, kind, qualified string) bool {
	if pol == nil {
		return false
	}
	r := pol.deciding(kind, qualified)
	return r != nil && r.grants(p.Roles)
}

// deciding returns the first rule one of whose patterns of kind matches
// name.
//
// For KindResource, name is <server>:<uri>: it is split at its first ':'
// (a server name holds none), and each half of a resource pattern matches
// its own half, the URI's with case; a name without ':' matches nothing.
func (pol *Policy) deciding(kind, name string) *compiled {
	r, _ := pol.decidingPattern(kind, name)
	return r
}

// decidingPattern is deciding, and for a resource whether the pattern
// that matched names the URI without a wildcard.
func (pol *Policy) decidingPattern(kind, name string) (*compiled, bool) {
	if kind == KindResource {
		server, uri, ok := strings.Cut(name, ":")
		if !ok {
			return nil, false
		}
		for i := range pol.rules {
			for _, pat := range pol.rules[i].resource {
				if Match(pat.server, server) && Match(pat.uri, uri) {
					return &pol.rules[i], !strings.Contains(pat.uri, "*")
				}
			}
		}
		return nil, false
	}
	lower := strings.ToLower(name)
	for i := range pol.rules {
		patterns := pol.rules[i].patterns
		if kind == KindPrompt {
			patterns = pol.rules[i].prompts
		}
		for _, pat := range patterns {
			if Match(pat, lower) {
				return &pol.rules[i], false
			}
		}
	}
	return nil, false
}

func kindName(k string) string {
	if k == "" {
		return "tool"
	}
	return k
}

func (r *compiled) grants(roles []string) bool {
	if r.anyRole {
		return true
	}
	for _, role := range roles {
		if r.roles[role] {
			return true
		}
	}
	return false
}

func principalVars(p Principal) map[string]any {
	roles := make([]any, len(p.Roles))
	for i, r := range p.Roles {
		roles[i] = r
	}
	return map[string]any{"subject": p.Subject, "issuer": p.Issuer, "roles": roles, "claims": orEmpty(p.Claims)}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// Match reports whether pattern matches the whole of name, `*` the only
// wildcard (it crosses dots). Callers fold case first.
func Match(pattern, name string) bool { return glob.Match(pattern, name) }
