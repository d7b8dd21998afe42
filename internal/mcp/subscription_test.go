package mcp

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp/schematest"
)

func TestListenParams(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		want         Listen
		uris         []string
		bad          bool
	}{
		{name: "lists", params: `{"_meta":{},"notifications":{"toolsListChanged":true,"promptsListChanged":false,"resourcesListChanged":true}}`,
			want: Listen{Tools: true, Resources: true}},
		{name: "resources once each, in order", params: `{"notifications":{"resourceSubscriptions":["b://x","a://y","b://x"]}}`,
			uris: []string{"b://x", "a://y"}},
		{name: "no resources", params: `{"notifications":{"resourceSubscriptions":[]}}`},
		{name: "null resources", params: `{"notifications":{"resourceSubscriptions":null}}`},
		{name: "resources not an array", params: `{"notifications":{"resourceSubscriptions":"a://y"}}`, bad: true},
		{name: "a resource not a string", params: `{"notifications":{"resourceSubscriptions":["a://y",7]}}`, bad: true},
		{name: "an unknown filter", params: `{"notifications":{"toolsChanged":true}}`, bad: true},
		{name: "no filter", params: `{"_meta":{}}`, bad: true},
		{name: "a filter not a bool", params: `{"notifications":{"toolsListChanged":"yes"}}`, bad: true},
		{name: "no params", bad: true},
		{name: "as many resources as may be named", params: `{"notifications":{"resourceSubscriptions":[` + strings.Repeat(`"a://y",`, MaxListenResources-1) + `"a://y"]}}`,
			uris: []string{"a://y"}},
		{name: "more resources than may be named, repeats counted", params: `{"notifications":{"resourceSubscriptions":[` + strings.Repeat(`"a://y",`, MaxListenResources) + `"a://y"]}}`,
			bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var params []byte
			if tc.params != "" {
				params = []byte(tc.params)
			}
			got, uris, err := ListenParams(params)
			if tc.bad {
				if !errors.Is(err, ErrListenParams) {
					t.Fatalf("ListenParams = %+v %q %v, want ErrListenParams", got, uris, err)
				}
				return
			}
			if err != nil || got != tc.want || !slices.Equal(uris, tc.uris) {
				t.Fatalf("ListenParams = %+v %q %v, want %+v %q", got, uris, err, tc.want, tc.uris)
			}
		})
	}
}

// TestSubscriptionMessages: what a listen stream carries is what the
// 2026-07-28 schema defines, each tied to its subscription.
func TestSubscriptionMessages(t *testing.T) {
	id := jsonrpc.StringID("sub-1")
	for _, tc := range []struct {
		name, def string
		msg       []byte
		want      string
	}{
		{"acknowledged, lists and resources", "SubscriptionsAcknowledgedNotification",
			SubscriptionAcknowledged(id, Listen{Tools: true, Resources: true}, []string{"file:///a.md", `x://"q"`}),
			`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1"},"notifications":{"toolsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["file:///a.md","x://\"q\""]}}}`},
		{"acknowledged, resources only", "SubscriptionsAcknowledgedNotification",
			SubscriptionAcknowledged(id, Listen{}, []string{"file:///a.md"}),
			`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1"},"notifications":{"resourceSubscriptions":["file:///a.md"]}}}`},
		{"acknowledged, nothing", "SubscriptionsAcknowledgedNotification", SubscriptionAcknowledged(id, Listen{}, nil),
			`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1"},"notifications":{}}}`},
		{"resource updated", "ResourceUpdatedNotification", SubscriptionResourceUpdated(id, "file:///a.md"),
			`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"sub-1"},"uri":"file:///a.md"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if string(tc.msg) != tc.want {
				t.Errorf("got  %s\nwant %s", tc.msg, tc.want)
			}
			schematest.Validate(t, "2026-07-28", tc.def, tc.msg)
		})
	}
}
