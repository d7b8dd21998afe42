package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/tool"
)

// customerIDSchema is shared by every tool that takes a customer id.
const customerIDSchema = `{"type":"string","pattern":"^CUST-[A-Z0-9]{5}$","description":"Customer id: CUST- followed by 5 upper-case letters or digits"}`

type customerIn struct {
	CustomerID string `json:"customer_id"`
}

type customerOut struct {
	CustomerID string    `json:"customer_id"`
	Found      bool      `json:"found"`
	Record     *Customer `json:"record,omitempty"`
}

type refundIn struct {
	CustomerID string  `json:"customer_id"`
	Amount     float64 `json:"amount"`
	Reason     string  `json:"reason"`
}

type refundOut struct {
	CustomerID string  `json:"customer_id"`
	Found      bool    `json:"found"`
	Status     string  `json:"status"`
	RefundID   string  `json:"refund_id,omitempty"`
	Amount     float64 `json:"amount"`
}

type resetIn struct {
	KeyID string `json:"key_id"`
}

type resetOut struct {
	KeyID          string `json:"key_id"`
	Status         string `json:"status"`
	NewFingerprint string `json:"new_key_fingerprint"`
}

type emptyIn struct{}

type auditOut struct {
	Entries []AuditEntry `json:"entries"`
}

// errStore hides store failures from the peer: the session turns it into a
// generic -32603 and logs the wrapped cause.
var errStore = errors.New("refund: store failure")

func newTools(s Store) ([]tool.Tool, error) {
	getCustomer, err := tool.New(tool.Descriptor{
		Name:        "get_customer_record",
		Title:       "Get customer record",
		Description: "Look up a customer by id. A customer that does not exist is a successful result with found: false.",
		InputSchema: jsontext.Value(`{"type":"object","properties":{"customer_id":` + customerIDSchema + `},"required":["customer_id"],"additionalProperties":false}`),
		OutputSchema: jsontext.Value(`{"type":"object","properties":{
			"customer_id":{"type":"string"},
			"found":{"type":"boolean"},
			"record":{"type":"object","properties":{
				"customer_id":{"type":"string"},"name":{"type":"string"},"email":{"type":"string"},
				"tier":{"type":"string"},"lifetime_spend":{"type":"number"}},
				"required":["customer_id","name","email","tier","lifetime_spend"],"additionalProperties":false}},
			"required":["customer_id","found"],"additionalProperties":false}`),
		Annotations: tool.ReadOnly,
	}, func(ctx context.Context, in customerIn) (customerOut, error) {
		c, err := s.Customer(ctx, in.CustomerID)
		if err != nil {
			return customerOut{}, fmt.Errorf("%w: %w", errStore, err)
		}
		return customerOut{CustomerID: in.CustomerID, Found: c != nil, Record: c}, nil
	})
	if err != nil {
		return nil, err
	}

	triggerRefund, err := tool.New(tool.Descriptor{
		Name:        "trigger_refund",
		Title:       "Trigger refund",
		Description: "Start a refund of amount (a number > 0) for a customer, with a reason of at least 10 characters.",
		InputSchema: jsontext.Value(`{"type":"object","properties":{
			"customer_id":` + customerIDSchema + `,
			"amount":{"type":"number","exclusiveMinimum":0,"description":"Amount to refund; a JSON number greater than 0"},
			"reason":{"type":"string","minLength":10,"description":"Why the refund is made; at least 10 characters"}},
			"required":["customer_id","amount","reason"],"additionalProperties":false}`),
		OutputSchema: jsontext.Value(`{"type":"object","properties":{
			"customer_id":{"type":"string"},"found":{"type":"boolean"},
			"status":{"enum":["refund_initiated","customer_not_found"]},
			"refund_id":{"type":"string"},"amount":{"type":"number"}},
			"required":["customer_id","found","status","amount"],"additionalProperties":false}`),
		// Moves money in another system: not read-only, not idempotent,
		// open world; it deletes nothing.
		Annotations: tool.Annotations{OpenWorldHint: true},
	}, func(ctx context.Context, in refundIn) (refundOut, error) {
		r, err := s.Refund(ctx, in.CustomerID, in.Amount, in.Reason)
		if err != nil {
			return refundOut{}, fmt.Errorf("%w: %w", errStore, err)
		}
		if r == nil {
			return refundOut{CustomerID: in.CustomerID, Status: "customer_not_found", Amount: in.Amount}, nil
		}
		return refundOut{CustomerID: in.CustomerID, Found: true, Status: "refund_initiated", RefundID: r.ID, Amount: r.Amount}, nil
	})
	if err != nil {
		return nil, err
	}

	resetKey, err := tool.New(tool.Descriptor{
		Name:        "admin_reset_key",
		Title:       "Reset an API key (admin)",
		Description: "Privileged: rotate an API key. Returns only the new key's fingerprint. Exists so that a gateway has something worth guarding.",
		InputSchema: jsontext.Value(`{"type":"object","properties":{"key_id":{"type":"string","pattern":"^KEY-[A-Z0-9_]{1,32}$"}},"required":["key_id"],"additionalProperties":false}`),
		OutputSchema: jsontext.Value(`{"type":"object","properties":{
			"key_id":{"type":"string"},"status":{"const":"key_reset"},"new_key_fingerprint":{"type":"string"}},
			"required":["key_id","status","new_key_fingerprint"],"additionalProperties":false}`),
		Annotations: tool.Annotations{DestructiveHint: true},
	}, func(ctx context.Context, in resetIn) (resetOut, error) {
		fp, err := s.ResetKey(ctx, in.KeyID)
		if err != nil {
			return resetOut{}, fmt.Errorf("%w: %w", errStore, err)
		}
		return resetOut{KeyID: in.KeyID, Status: "key_reset", NewFingerprint: fp}, nil
	})
	if err != nil {
		return nil, err
	}

	auditLog, err := tool.New(tool.Descriptor{
		Name:        "admin_list_audit_log",
		Title:       "List the audit log (admin)",
		Description: "Privileged: list refunds and key resets made through this server, oldest first.",
		InputSchema: jsontext.Value(`{"type":"object","properties":{},"additionalProperties":false}`),
		OutputSchema: jsontext.Value(`{"type":"object","properties":{"entries":{"type":"array","items":{"type":"object","properties":{
			"at":{"type":"string","format":"date-time"},"action":{"type":"string"},"target":{"type":"string"}},
			"required":["at","action","target"],"additionalProperties":false}}},
			"required":["entries"],"additionalProperties":false}`),
		Annotations: tool.ReadOnly,
	}, func(ctx context.Context, _ emptyIn) (auditOut, error) {
		entries, err := s.AuditLog(ctx)
		if err != nil {
			return auditOut{}, fmt.Errorf("%w: %w", errStore, err)
		}
		if entries == nil {
			entries = []AuditEntry{}
		}
		return auditOut{Entries: entries}, nil
	})
	if err != nil {
		return nil, err
	}
	return []tool.Tool{getCustomer, triggerRefund, resetKey, auditLog}, nil
}
