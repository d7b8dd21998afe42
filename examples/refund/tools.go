package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

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
	CustomerID string `json:"customer_id"`
	// Amount is kept as the caller wrote it (the schema has made it a
	// number > 0) so that exactAmount can see what a float64 would lose.
	Amount jsontext.Value `json:"amount"`
	Reason string         `json:"reason"`
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
		amount, ok := exactAmount(string(in.Amount))
		if !ok {
			return refundOut{}, tool.NewArgumentError(
				`"amount": must be greater than 0 and exactly what it says as a 64-bit float (at most 15 significant digits)`,
				"amount")
		}
		r, err := s.Refund(ctx, in.CustomerID, amount, in.Reason)
		if err != nil {
			return refundOut{}, fmt.Errorf("%w: %w", errStore, err)
		}
		if r == nil {
			return refundOut{CustomerID: in.CustomerID, Status: "customer_not_found", Amount: amount}, nil
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

// exactAmount returns the float64 of the JSON number s, and false unless
// it is greater than 0 and the shortest decimal form of that float64 is
// the very number s wrote. A float64 rounds what it cannot hold: without
// this check 9007199254740993 would be refunded as 9007199254740992 and
// 1e-400 as 0, each reported as done. 0.1 passes: its float64 prints as
// 0.1. The comparison is on decimal digits, not big numbers, so an
// exponent like 1e-999999999 costs nothing to refuse.
func exactAmount(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		return 0, false
	}
	want, ok := decimalValue(s)
	if !ok {
		return 0, false
	}
	got, _ := decimalValue(strconv.FormatFloat(f, 'g', -1, 64))
	return f, want == got
}

// decimal is a non-negative number as significant digits × 10^exp, with no
// leading or trailing zeros in digits (zero has no digits).
type decimal struct {
	digits string
	exp    int64
}

// decimalValue reads a JSON number without a sign into its decimal; false
// for anything else.
func decimalValue(s string) (decimal, bool) {
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 32)
		if err != nil {
			return decimal{}, false
		}
		mant, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	if strings.Trim(digits, "0123456789") != "" {
		return decimal{}, false
	}
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	if trimmed == "" {
		return decimal{}, true
	}
	return decimal{digits: trimmed, exp: exp}, true
}
