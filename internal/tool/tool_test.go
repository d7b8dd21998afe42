package tool

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/problem"
)

type in struct {
	N    int64    `json:"n"`
	F    float64  `json:"f"`
	S    string   `json:"s"`
	B    bool     `json:"b"`
	Tags []string `json:"tags"`
}

type out struct {
	N int64 `json:"n"`
}

func newTool(t *testing.T) Tool {
	t.Helper()
	tl, err := New(Descriptor{
		Name: "t",
		InputSchema: jsontext.Value(`{"type":"object","properties":{
			"n":{"type":"integer","maximum":9007199254740993},"f":{"type":"number","exclusiveMinimum":0},
			"s":{"type":"string","minLength":2},"b":{"type":"boolean"},
			"tags":{"type":"array","items":{"type":"string"}}},
			"required":["n"],"additionalProperties":false}`),
		OutputSchema: jsontext.Value(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`),
	}, func(_ context.Context, x in) (out, error) { return out{N: x.N}, nil })
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestStrictArguments: no coercion, unknown fields refused, the failure
// names the argument and never repeats its value.
func TestStrictArguments(t *testing.T) {
	tl := newTool(t)
	cases := []struct {
		args  string
		param string
	}{
		{`{"n":"10"}`, "n"},
		{`{"n":true}`, "n"},
		{`{"n":1.5}`, "n"},
		{`{"n":1,"f":"1.0"}`, "f"},
		{`{"n":1,"f":false}`, "f"},
		{`{"n":1,"f":0}`, "f"},
		{`{"n":1,"s":"x"}`, "s"},
		{`{"n":1,"b":1}`, "b"},
		{`{"n":1,"tags":"a"}`, "tags"},
		{`{"n":1,"tags":[1]}`, "tags"},
		{`{"n":1,"secret_extra":"hunter2"}`, "secret_extra"},
		{`{}`, "n"},
	}
	for _, c := range cases {
		_, err := tl.Call(context.Background(), jsontext.Value(c.args))
		var ae *ArgumentError
		if !errors.As(err, &ae) {
			t.Errorf("%s: err = %v, want *ArgumentError", c.args, err)
			continue
		}
		if ae.Problem.Code != problem.Validation || len(ae.Problem.InvalidParams) != 1 || ae.Problem.InvalidParams[0] != c.param {
			t.Errorf("%s: problem = %+v, want invalid_params [%s]", c.args, ae.Problem, c.param)
		}
		if strings.Contains(ae.Problem.Detail, "hunter2") {
			t.Errorf("%s: detail repeats a value: %s", c.args, ae.Problem.Detail)
		}
	}
}

// TestExactNumbers: the schema sees each number's exact text, so an
// integer beyond 2^53 is compared exactly against the schema's bound.
func TestExactNumbers(t *testing.T) {
	tl := newTool(t)
	if _, err := tl.Call(context.Background(), jsontext.Value(`{"n":9007199254740993}`)); err != nil {
		t.Fatalf("2^53+1 at the bound: %v", err)
	}
	if _, err := tl.Call(context.Background(), jsontext.Value(`{"n":9007199254740994}`)); err == nil {
		t.Fatal("2^53+2 above the bound was accepted")
	}
	res, err := tl.Call(context.Background(), jsontext.Value(`{"n":42,"f":0.5,"s":"ok","b":true,"tags":["a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Structured) != `{"n":42}` {
		t.Fatalf("result = %s", res.Structured)
	}
	if err := ValidateOutput(tl, res.Structured); err != nil {
		t.Fatal(err)
	}
}

func TestRegistry(t *testing.T) {
	a := newTool(t)
	if _, err := NewRegistry(a, a); err == nil {
		t.Fatal("duplicate names accepted")
	}
	bad := MustNew(Descriptor{Name: "bad name", InputSchema: jsontext.Value(`{"type":"object"}`)},
		func(context.Context, struct{}) (out, error) { return out{}, nil })
	if _, err := NewRegistry(bad); err == nil {
		t.Fatal("a name with a space accepted")
	}
	if _, err := New(Descriptor{Name: "x", InputSchema: jsontext.Value(`{"type":"object","$ref":"https://example.com/s.json"}`)},
		func(context.Context, struct{}) (out, error) { return out{}, nil }); err == nil {
		t.Fatal("a remote $ref was accepted")
	}
}

func TestRatString(t *testing.T) {
	for r, want := range map[string]string{"0": "0", "-3": "-3", "1/2": "0.5", "1/10": "0.1", "1e300": "1e+300"} {
		v, ok := new(big.Rat).SetString(r)
		if !ok {
			t.Fatal(r)
		}
		if got := ratString(v); got != want {
			t.Errorf("ratString(%s) = %q, want %q", r, got, want)
		}
	}
}
