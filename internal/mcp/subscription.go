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

// ListenParams reads the params of a subscriptions/listen and reports
// whether the client asked to hear that the tool list changed, the only
// change this project's servers announce. Unknown members are refused.
func ListenParams(params []byte) (tools bool, err error) {
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
		return false, ErrListenParams
	}
	return p.Notifications.Tools != nil && *p.Notifications.Tools, nil
}

// subscriptionMeta is the _meta member that ties a message to subscription id.
func subscriptionMeta(id jsonrpc.ID) []byte {
	b := []byte(`{"` + MetaSubscriptionID + `":`)
	b = id.AppendJSON(b)
	return append(b, '}')
}

// SubscriptionAcknowledged is the first message of the stream of
// subscription id: what it will carry.
func SubscriptionAcknowledged(id jsonrpc.ID, tools bool) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":`)
	b = append(b, subscriptionMeta(id)...)
	if tools {
		return append(b, `,"notifications":{"toolsListChanged":true}}}`...)
	}
	return append(b, `,"notifications":{}}}`...)
}

// SubscriptionToolsChanged says on subscription id that the tool list changed.
func SubscriptionToolsChanged(id jsonrpc.ID) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":`)
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
