package gateway

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/auth"
)

// TestInputSeal: a round handed to a caller opens only for that caller
// (issuer and subject), that tool and those arguments (however they are
// re-encoded, but not re-spelled), before it expires, under the key that
// sealed it and unaltered; the downstream's state is not readable in it.
func TestInputSeal(t *testing.T) {
	s := randomSealer()
	alice := auth.Principal{Subject: "alice", Issuer: "static", Roles: []string{"admin"}}
	now := time.Unix(1_800_000_000, 0)
	downstream := "the server's own state: account 4711"
	args := jsontext.Value(`{"b":[1,2.50],"a":{"y":"z","x":true}}`)
	r := handedRound{Issuer: alice.Issuer, Subject: alice.Subject, Tool: "fx.ask", Args: argsDigest(args),
		Expires: now.Add(inputStateTTL).Unix(), Round: 3, Asked: map[string]string{"confirm": "elicitation/create"}, State: &downstream}
	state, err := s.seal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, form := range []string{downstream, "4711", base64.StdEncoding.EncodeToString([]byte(downstream)),
		base64.RawURLEncoding.EncodeToString([]byte(downstream)), "alice", "confirm"} {
		if strings.Contains(state, form) {
			t.Errorf("the sealed state shows %q: %s", form, state)
		}
	}
	got, err := s.open(state, alice, "fx.ask", jsontext.Value(" {\"a\": {\"x\": true, \"y\": \"z\"}, \"b\": [1, 2.50]}\n"), now)
	if err != nil || got.Round != 3 || got.State == nil || *got.State != downstream || got.Asked["confirm"] != "elicitation/create" {
		t.Fatalf("open: %+v, %v", got, err)
	}
	// Each seal is fresh: two of one round do not match.
	if again, _ := s.seal(r); again == state {
		t.Error("two seals of one round are the same text")
	}

	tampered := []byte(state)
	tampered[len(sealPrefix)+10] ^= 1
	for _, tc := range []struct {
		name  string
		state string
		p     auth.Principal
		tool  string
		args  string
		at    time.Time
		s     *inputSealer
	}{
		{name: "another subject", p: auth.Principal{Subject: "bob", Issuer: "static"}},
		{name: "another issuer", p: auth.Principal{Subject: "alice", Issuer: "https://idp.example"}},
		{name: "another tool", tool: "fx.ask-forever"},
		{name: "other arguments", args: `{"a":{"x":true,"y":"z"},"b":[1,2.5]}`},
		{name: "fewer arguments", args: `{"a":{"x":true,"y":"z"}}`},
		{name: "expired", at: now.Add(inputStateTTL)},
		{name: "another key", s: randomSealer()},
		{name: "altered", state: string(tampered)},
		{name: "no prefix", state: strings.TrimPrefix(state, sealPrefix)},
		{name: "another prefix", state: "bastion-input-2." + strings.TrimPrefix(state, sealPrefix)},
		{name: "not base64", state: sealPrefix + "!!"},
		{name: "empty", state: ""},
		{name: "too long", state: state + strings.Repeat("A", maxSealedState)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, p, tool, a, at, sealer := state, alice, "fx.ask", args, now, s
			if tc.state != "" || tc.name == "empty" {
				st = tc.state
			}
			if tc.p.Subject != "" {
				p = tc.p
			}
			if tc.tool != "" {
				tool = tc.tool
			}
			if tc.args != "" {
				a = jsontext.Value(tc.args)
			}
			if !tc.at.IsZero() {
				at = tc.at
			}
			if tc.s != nil {
				sealer = tc.s
			}
			if got, err := sealer.open(st, p, tool, a, at); err != errBadState {
				t.Errorf("opened: %+v, %v", got, err)
			}
		})
	}

	// A state too large to hand out is refused when sealed.
	big := strings.Repeat("x", maxSealedState)
	r.State = &big
	if _, err := s.seal(r); err == nil {
		t.Error("a state too large to hand to the caller was sealed")
	}
}

// TestSealKeys: replicas given one key open each other's rounds; other
// keys do not.
func TestSealKeys(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, _ := newInputSealer(secret)
	b, _ := newInputSealer(secret)
	c, _ := newInputSealer([]byte("0123456789abcdef0123456789abcdeF"))
	p := auth.Principal{Subject: "s", Issuer: "static"}
	now := time.Now()
	state, err := a.seal(handedRound{Issuer: "static", Subject: "s", Tool: "t", Args: argsDigest(jsontext.Value(`{}`)), Expires: now.Add(time.Minute).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.open(state, p, "t", jsontext.Value(`{}`), now); err != nil {
		t.Errorf("a replica with the key: %v", err)
	}
	if _, err := c.open(state, p, "t", jsontext.Value(`{}`), now); err == nil {
		t.Error("another key opened the round")
	}
}

func TestAnswersTo(t *testing.T) {
	asked := map[string]string{"a": "elicitation/create", "b": "roots/list"}
	for _, tc := range []struct {
		name, responses string
		asked           map[string]string
		want            map[string]string
		bad             string
	}{
		{name: "every request", responses: `{"b": {"roots": []}, "a": {"action": "accept"}}`, asked: asked,
			want: map[string]string{"a": `{"action":"accept"}`, "b": `{"roots":[]}`}},
		{name: "one missing", responses: `{"a":{"action":"accept"}}`, asked: asked, bad: "every request"},
		{name: "one not asked", responses: `{"a":{},"b":{},"c":{}}`, asked: asked, bad: "did not ask"},
		{name: "one in another case", responses: `{"A":{},"b":{}}`, asked: asked, bad: "did not ask"},
		{name: "not an object", responses: `[]`, asked: asked, bad: "must be an object"},
		{name: "a repeated key", responses: `{"a":{},"a":{},"b":{}}`, asked: asked, bad: "must be an object"},
		{name: "an answer not an object", responses: `{"a":"accept","b":{}}`, asked: asked, bad: "result object"},
		{name: "a bidirectional override", responses: `{"a":{"content":{"name":"\u202etxt.exe"}},"b":{}}`, asked: asked, bad: "bidirectional control"},
		{name: "a number beyond a double", responses: `{"a":{"content":{"n":1e400}},"b":{}}`, asked: asked, bad: "out of range"},
		{name: "a form field named freely", responses: `{"a":{"content":{"first name":"Ada","e-mail":"a@b"}},"b":{"roots":[]}}`, asked: asked,
			want: map[string]string{"a": `{"content":{"first name":"Ada","e-mail":"a@b"}}`, "b": `{"roots":[]}`}},
		{name: "a control character in a field's name", responses: `{"a":{"content":{"x\u0007":1}},"b":{}}`, asked: asked, bad: "control character"},
		{name: "none, none asked", asked: map[string]string{}, want: map[string]string{}},
		{name: "empty, none asked", responses: `{}`, asked: map[string]string{}, want: map[string]string{}},
		{name: "none, some asked", asked: asked, bad: "every request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var responses jsontext.Value
			if tc.responses != "" {
				responses = jsontext.Value(tc.responses)
			}
			got, err := answersTo(tc.asked, responses)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tc.bad)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("got %v, %v", got, err)
			}
			for k, v := range tc.want {
				if string(got[k]) != v {
					t.Errorf("%s: %s, want %s", k, got[k], v)
				}
			}
		})
	}
}
