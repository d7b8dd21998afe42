package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
)

// auth checks the authentication methods and resolves the static tokens.
func (v *validator) auth(c *Config) {
	a := &c.Auth
	methods := len(a.Tokens) > 0 || a.TokensEnv != "" || a.JWT != nil
	switch a.Mode {
	case "none":
		if methods {
			v.fail("auth.mode", "none cannot be combined with tokens, tokens_env or jwt")
		}
		if !Loopback(c.Listen) {
			v.fail("listen", "with auth mode none the gateway listens on a loopback address only (127.0.0.1, [::1] or localhost)")
		}
		return
	case "":
		if !methods {
			if v.noCallers && a.StdioPrincipal != nil {
				// gateway --stdio alone: its one client is the
				// principal, and no HTTP caller is authenticated.
				break
			}
			v.fail("auth", "no authentication method is configured (tokens, tokens_env or jwt); "+
				"set auth: {mode: none} to run without one, on loopback only, or, for gateway --stdio alone, auth.stdio_principal")
			return
		}
	default:
		v.fail("auth.mode", `must be "none", or left out when tokens, tokens_env or jwt are set`)
		return
	}
	seen := map[[32]byte]bool{}
	for i, t := range a.Tokens {
		p := fmt.Sprintf("auth.tokens[%d]", i)
		sum, err := hex.DecodeString(t.SHA256)
		if err != nil || len(sum) != sha256.Size || strings.ToLower(t.SHA256) != t.SHA256 {
			v.fail(p+".sha256", "must be the 64 lower-case hex digits of the token's SHA-256 (never the token itself)")
			continue
		}
		st := auth.StaticToken{Subject: t.Subject, Roles: t.Roles}
		copy(st.SHA256[:], sum)
		if t.Subject == "" {
			v.fail(p+".subject", "is required")
		}
		v.roles(p+".roles", t.Roles)
		if seen[st.SHA256] {
			v.fail(p+".sha256", "another token has the same digest")
		}
		seen[st.SHA256] = true
		a.Static = append(a.Static, st)
	}
	if a.TokensEnv != "" {
		switch val, ok := v.getenv(a.TokensEnv); {
		case !envName.MatchString(a.TokensEnv):
			v.fail("auth.tokens_env", "must be an environment variable name")
		case v.offline, v.noCallers:
			// No HTTP caller is authenticated: the tokens are not read.
		case !ok || val == "":
			v.fail("auth.tokens_env", "names %s, which is not set or empty", a.TokensEnv)
		default:
			toks, err := auth.ParseTokensEnv(val)
			if err != nil {
				v.fail("auth.tokens_env", "%s: %s", a.TokensEnv, strings.TrimPrefix(err.Error(), "auth: tokens: "))
				break
			}
			for _, st := range toks {
				if seen[st.SHA256] {
					v.fail("auth.tokens_env", "%s repeats a token of auth.tokens", a.TokensEnv)
				}
				seen[st.SHA256] = true
			}
			a.Static = append(a.Static, toks...)
		}
	}
	if j := a.JWT; j != nil {
		if j.Issuer == "" {
			v.fail("auth.jwt.issuer", "is required: the exact iss of accepted tokens")
		}
		u, err := url.Parse(j.JWKSURL)
		switch {
		case j.JWKSURL == "":
			v.fail("auth.jwt.jwks_url", "is required: keys are fetched from there only")
		case err != nil || u.Host == "" || u.User != nil || u.Fragment != "":
			v.fail("auth.jwt.jwks_url", "must be an absolute URL without user or fragment")
		case u.Scheme == "https":
		case u.Scheme == "http" && (loopbackHost(u.Hostname()) || j.InsecureHTTP):
		case u.Scheme == "http":
			v.fail("auth.jwt.jwks_url", "http is allowed only to a loopback address; use https, or set insecure_http: true")
		default:
			v.fail("auth.jwt.jwks_url", "must be http or https")
		}
		if j.RolesClaim == "" || strings.ContainsAny(j.RolesClaim, " \t") {
			v.fail("auth.jwt.roles_claim", "must name a claim")
		}
		for i, alg := range j.Algorithms {
			if !slices.Contains(auth.DefaultAlgorithms, alg) {
				v.fail(fmt.Sprintf("auth.jwt.algorithms[%d]", i), "must be one of %s (never none or an HMAC)", strings.Join(auth.DefaultAlgorithms, ", "))
			}
		}
		v.duration("auth.jwt.leeway", j.Leeway, 0, 5*time.Minute)
		v.duration("auth.jwt.jwks_refresh", j.JWKSRefresh, time.Second, 24*time.Hour)
		v.duration("auth.jwt.jwks_min_refresh", j.JWKSMinRefresh, time.Millisecond, time.Hour)
	}
	if m := a.ResourceMetadata; m != nil {
		for i, s := range m.AuthorizationServers {
			if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				v.fail(fmt.Sprintf("auth.resource_metadata.authorization_servers[%d]", i), "must be an absolute http or https URL")
			}
		}
	}
	if sp := a.StdioPrincipal; sp != nil {
		if sp.Subject == "" {
			v.fail("auth.stdio_principal.subject", "is required")
		}
		v.roles("auth.stdio_principal.roles", sp.Roles)
	}
}

func (v *validator) roles(path string, roles []string) {
	if len(roles) == 0 {
		v.fail(path, "at least one role is required")
	}
	for i, r := range roles {
		if !policy.ValidRole(r) {
			v.fail(fmt.Sprintf("%s[%d]", path, i), "must be 1-64 characters of [A-Za-z0-9_.:-]")
		}
	}
}

// policy checks the rules by compiling them, as start-up will, and the
// rate limit.
func (v *validator) policy(c *Config) {
	if _, err := policy.Compile(c.PolicyRules()); err != nil {
		path := "policy.rules"
		if re, ok := errors.AsType[*policy.RuleError](err); ok {
			path = fmt.Sprintf("policy.rules[%d]", re.Index) // the rule's own line
		}
		v.fail(path, "%s", strings.TrimPrefix(err.Error(), "policy: "))
	}
	if r := c.Policy.Rate; r != nil && r.PerPrincipal == "off" {
		c.Policy.Rate = nil
		return
	}
	if r := c.Policy.Rate; r != nil {
		if r.Every = v.rate("policy.rate.per_principal", r.PerPrincipal); r.Every == 0 {
			return
		}
		if r.Burst == 0 {
			r.Burst = max(1, int(time.Second/max(r.Every, 1)))
		}
		v.positive("policy.rate.burst", r.Burst, 1_000_000)
	}
}

// PolicyRules returns the configured rules as the policy package reads them.
func (c *Config) PolicyRules() []policy.Rule {
	out := make([]policy.Rule, len(c.Policy.Rules))
	for i, r := range c.Policy.Rules {
		out[i] = policy.Rule{ID: r.ID, Tools: r.Tools, Prompts: r.Prompts, Resources: r.Resources, Roles: r.Roles, When: r.When}
	}
	return out
}

// rate reads a count per unit ("50/s", "600/m", "10000/h") as the
// interval between two events; 0 after an error.
func (v *validator) rate(path, s string) time.Duration {
	n, unit, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(n)
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	if !ok || err != nil || count < 1 || per == 0 || per/time.Duration(count) == 0 {
		v.fail(path, `must be a count per s, m or h, as "50/s"`)
		return 0
	}
	return per / time.Duration(count)
}
