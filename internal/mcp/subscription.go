package mcp

import (
	"errors"
	"fmt"

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

// MaxListenResources is the most resources one subscriptions/listen may
// name in resourceSubscriptions, repeats included.
const MaxListenResources = 64

// Listen is which list changes a subscriptions/listen asks to hear.
type Listen struct {
	Tools, Prompts, Resources bool
}

// ListenParams reads the params of a subscriptions/listen: which list
// changes the client asked to hear, and the resources whose updates it
// asks to follow (resourceSubscriptions), each once, in the order first
// named. Unknown members are refused, as is a resourceSubscriptions that
// is not an array of strings or holds more than MaxListenResources.
func ListenParams(params []byte) (Listen, []string, error) {
	var p struct {
		Notifications *struct {
			Tools     *bool     `json:"toolsListChanged"`
			Prompts   *bool     `json:"promptsListChanged"`
			Resources *bool     `json:"resourcesListChanged"`
			URIs      *[]string `json:"resourceSubscriptions"`
		} `json:"notifications"`
		Meta jsontext.Value `json:"_meta"`
	}
	if params == nil || json.Unmarshal(params, &p, json.RejectUnknownMembers(true)) != nil || p.Notifications == nil {
		return Listen{}, nil, ErrListenParams
	}
	n := p.Notifications
	isTrue := func(b *bool) bool { return b != nil && *b }
	var uris []string
	if n.URIs != nil && len(*n.URIs) > MaxListenResources {
		return Listen{}, nil, fmt.Errorf("%w: resourceSubscriptions names more than %d resources", ErrListenParams, MaxListenResources)
	}
	if n.URIs != nil {
		// A map, not a scan of uris: the array is the client's, as long
		// as the body cap allows.
		seen := make(map[string]bool, len(*n.URIs))
		for _, u := range *n.URIs {
			if !seen[u] {
				seen[u] = true
				uris = append(uris, u)
			}
		}
	}
	return Listen{Tools: isTrue(n.Tools), Prompts: isTrue(n.Prompts), Resources: isTrue(n.Resources)}, uris, nil
}

// subscriptionMeta is the _meta member that ties a message to subscription id.
func subscriptionMeta(id jsonrpc.ID) []byte {
	b := []byte(`{"` + MetaSubscriptionID + `":`)
	b = id.AppendJSON(b)
	return append(b, '}')
}

// SubscriptionAcknowledged is the first message of the stream of
// subscription id: what it will carry, of the list notifications in l
// and the updates of the resources uris (a server acknowledges only what
// it will send).
func SubscriptionAcknowledged(id jsonrpc.ID, l Listen, uris []string) []byte {
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
	if len(uris) > 0 {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `"resourceSubscriptions":[`...)
		for i, u := range uris {
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = jsontext.AppendQuote(b, u)
		}
		b = append(b, ']')
	}
	return append(b, `}}}`...)
}

// SubscriptionResourceUpdated says on subscription id that the resource
// uri was updated.
func SubscriptionResourceUpdated(id jsonrpc.ID, uri string) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":`)
	b = append(b, subscriptionMeta(id)...)
	b = append(b, `,"uri":`...)
	b, _ = jsontext.AppendQuote(b, uri)
	return append(b, `}}`...)
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
