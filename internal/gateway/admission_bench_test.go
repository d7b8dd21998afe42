package gateway

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway/admit"
	"github.com/mcp-bastion/bastion/internal/gateway/catalog"
	"github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/gateway/discover"
)

// benchPages is a 10,000-tool list in 100 pages of realistic descriptors
// (a description, an object schema with a few typed, described
// properties, an output schema, annotations), as tools/list results.
func benchPages(b *testing.B, distinct bool) []jsontext.Value {
	b.Helper()
	const pages, per = 100, 100
	out := make([]jsontext.Value, pages)
	for p := range pages {
		page := []byte(`{"tools":[`)
		for i := range per {
			n := p*per + i
			if i > 0 {
				page = append(page, ',')
			}
			most := 100
			if distinct {
				most += n // every schema its own: no compilation is shared
			}
			page = fmt.Appendf(page, `{"name":"tool_%05d","title":"Tool %d","description":"Looks up record %d in the inventory service and returns its fields. Read-only; results are paginated.",`+
				`"inputSchema":{"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]{3}-[0-9]{5}$","description":"The record id"},`+
				`"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"Most rows"},"region":{"type":"string","enum":["eu","us","ap"],"x-mcp-header":"Region"}},`+
				`"required":["id"],"additionalProperties":false},`+
				`"outputSchema":{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object"}},"total":{"type":"integer"}},"required":["rows"]},`+
				`"annotations":{"readOnlyHint":true,"openWorldHint":false}}`, n, n, n, most)
		}
		page = append(page, ']')
		if p+1 < pages {
			page = append(page, `,"nextCursor":`...)
			page = strconv.AppendQuote(page, strconv.Itoa(p+1))
		}
		out[p] = append(page, '}')
	}
	return out
}

// BenchmarkAdmission10k is the admission of 10,000 descriptors over 100
// pages, as a discovery does it: the cursor walk, then for every
// descriptor the strict parse, schema compile, header walk, RFC 8785
// digest and scanner, then one ledger transaction writing every record
// to the bbolt file. "first" admits into an empty ledger (every record
// written); "again" is the re-discovery of an unchanged list (every
// record read and judged, none written). Their input schemas are one
// schema repeated, as in generated APIs; "first-distinct" gives every
// descriptor a schema of its own, so that every one is compiled. "walk"
// is the baseline measured in the same run: the cursor walk alone.
func BenchmarkAdmission10k(b *testing.B) {
	// The baseline: the cursor walk of the same 100 pages, no admission.
	b.Run("walk", func(b *testing.B) {
		run := admission10k(b, benchPages(b, false))
		for b.Loop() {
			if res := discover.Walk(b.Context(), run.lister, discover.Limits{Pages: 1000, Tools: 100_000, Timeout: time.Minute}); len(res.Tools) != 10_000 {
				b.Fatal(res.Err)
			}
		}
	})
	for _, distinct := range []bool{false, true} {
		name := "first"
		if distinct {
			name = "first-distinct"
		}
		b.Run(name, func(b *testing.B) {
			run := admission10k(b, benchPages(b, distinct))
			for b.Loop() {
				b.StopTimer()
				g := run.gateway(b)
				b.StartTimer()
				run.admit(b, g)
			}
		})
	}
	b.Run("again", func(b *testing.B) {
		run := admission10k(b, benchPages(b, false))
		g := run.gateway(b)
		run.admit(b, g)
		for b.Loop() {
			run.admit(b, g)
		}
	})
}

type admissionRun struct {
	lister discover.Lister
}

func (r admissionRun) gateway(b *testing.B) *Gateway {
	g := New(&config.Config{Admission: config.Admission{FirstUse: "pin"}}, nil)
	useLedger(b, g)
	return g
}

func (r admissionRun) admit(b *testing.B, g *Gateway) {
	res := discover.Walk(b.Context(), r.lister, discover.Limits{Pages: 1000, Tools: 100_000, Timeout: time.Minute})
	if res.Err != nil {
		b.Fatal(res.Err)
	}
	if err := g.catalog.Update(catalog.Server{Name: "inv", Identity: admit.Identity{Name: "inv", Version: "1"}}, res.Tools); err != nil {
		b.Fatal(err)
	}
	if n := len(g.catalog.Snapshot().Tools); n != 10_000 {
		b.Fatalf("%d admitted, %d rejected", n, len(g.catalog.Snapshot().Rejected))
	}
}

func admission10k(b *testing.B, pages []jsontext.Value) admissionRun {
	b.Helper()
	lister := discover.ListerFunc(func(_ context.Context, params []byte) (jsontext.Value, error) {
		var p struct {
			Cursor string `json:"cursor"`
		}
		_ = json.Unmarshal(params, &p)
		i, _ := strconv.Atoi(p.Cursor)
		return pages[i], nil
	})
	return admissionRun{lister: lister}
}
