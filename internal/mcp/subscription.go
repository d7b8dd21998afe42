package mcp

import (
	"errors"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// A 2026-07-28 server keeps no session, so it tells a client of changes
// only on the subscriptions/listen requests the client holds open: it
// acknowledges what it will send, tags every notification with the
// request's id, and answers the request only when it ends the stream.
// These are the messages of such a stream, shared by every transport.

// MetaSubscriptionID tags a notification with the subscription it belongs to.
const MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// ErrListenParams: the params of a subscriptions/listen do not match the
// method's schema.
var ErrListenParams = errors.New("params do not match subscriptions/listen")

// Listen is what a subscriptions/listen asks to hear.
type Listen struct {
	Tools, Prompts, Resources bool
	// ResourceSubscriptions: the request names resources to follow.
	ResourceSubscriptions bool
}

// ListenParams reads the params of a subscriptions/listen: which
// notifications the client asked for. Unknown members are refused.
func ListenParams(params []byte) (Listen, error) {
	var p struct {
		Notifications *struct {
			Tools     *bool          `json:"toolsListChanged"`
			Prompts   *bool          `json:"promptsListChanged"`
			Resources *bool          `json:"resourcesListChanged"`
			Subs      jsontext.Value `json:"resourceSubscriptions"`
		} `json:"notifications"`
		Meta jsontext.Value `json:"_meta"`
	}
	if params == nil || json.Unmarshal(params, &p, json.RejectUnknownMembers(true)) != nil || p.Notifications == nil {
		return Listen{}, ErrListenParams
	}
	n := p.Notifications
	isTrue := func(b *bool) bool { return b != nil && *b }
	return Listen{Tools: isTrue(n.Tools), Prompts: isTrue(n.Prompts), Resources: isTrue(n.Resources),
		ResourceSubscriptions: len(n.Subs) > 0 && n.Subs.Kind() == '[' && string(n.Subs) != "[]"}, nil
}

// subscriptionMeta is the _meta member that ties a message to subscription id.
func subscriptionMeta(id jsonrpc.ID) []byte {
	b := []byte(`{"` + MetaSubscriptionID + `":`)
	b = id.AppendJSON(b)
	return append(b, '}')
}

// SubscriptionAcknowledged is the first message of the stream of
// subscription id: what it will carry, of the list notifications in l
// (a server acknowledges only what it will send).
func SubscriptionAcknowledged(id jsonrpc.ID, l Listen) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":`)
	b = append(b, subscriptionMeta(id)...)
	b = append(b, `,"notifications":{`...)
	n := 0
	for _, f := range []struct {
		on   bool
		name string
	}{{l.Tools, "toolsListChanged"}, {l.Prompts, "promptsListChanged"}, {l.Resources, "resourcesListChanged"}} {
		if !f.on {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `"`+f.name+`":true`...)
		n++
	}
	return append(b, `}}}`...)
}

// SubscriptionToolsChanged says on subscription id that the tool list changed.
func SubscriptionToolsChanged(id jsonrpc.ID) []byte {
	return SubscriptionListChanged(id, "notifications/tools/list_changed")
}

// SubscriptionListChanged sends the list_changed notification method on
// subscription id.
func SubscriptionListChanged(id jsonrpc.ID, method string) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":`)
	b, _ = jsontext.AppendQuote(b, method)
	b = append(b, `,"params":{"_meta":`...)
	b = append(b, subscriptionMeta(id)...)
	return append(b, `}}`...)
}

// SubscriptionComplete is the response that ends subscription id.
func SubscriptionComplete(id jsonrpc.ID) []byte {
	res := []byte(`{"_meta":`)
	res = append(res, subscriptionMeta(id)...)
	res = append(res, `,"resultType":"complete"}`...)
	return jsonrpc.AppendResult(nil, id, res)
}
