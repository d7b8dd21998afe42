module github.com/mcp-bastion/bastion

go 1.26.10

require (
	cel.dev/cel-go v0.33.2 // the gateway's policy conditions: compiled and type-checked at start-up, cost-limited
	github.com/go-json-experiment/json v1.27.2 // strict JSON: duplicate names, invalid UTF-8, exact-case members (encoding/json/v2 API)
	github.com/jackc/pgx/v5 v5.12.0 // PostgreSQL driver and pool for read_only_sql (pinned extended-protocol exec mode)
	github.com/lestrrat-go/jwx/v3 v3.4.0 // the gateway's JWT and JWKS verification
	github.com/modelcontextprotocol/go-sdk v1.8.0 // tests and benchmarks only: the official Go SDK client and server as interop peers
	github.com/pganalyze/pg_query_go/v6 v6.2.5 // the real PostgreSQL parser (cgo) for the SQL policy
	github.com/prometheus/client_golang v1.25.0 // the gateway's metrics (opt-in listen address)
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // JSON Schema 2020-12 validation of tool arguments
	github.com/shirou/gopsutil/v4 v4.26.10 // system_metrics
	go.uber.org/goleak v1.3.0 // tests only: goroutine leak checks
	go.yaml.in/yaml/v3 v3.0.6 // gateway configuration: parsed into a node tree, decoded strictly by internal/gateway/config
	golang.org/x/sys v0.50.0 // openat2 for sandbox_fs_read
	golang.org/x/text v0.42.0 // English messages of schema validation errors
	golang.org/x/time v0.16.0 // the gateway's per-principal and per-address token buckets
	google.golang.org/protobuf v1.36.12 // protoreflect walk of pg_query parse trees
)

require (
	github.com/gowebpki/jcs v1.0.2 // tests only: the RFC 8785 reference implementation, oracle of the canonical form a digest is taken of
	github.com/yosida95/uritemplate/v3 v3.0.2 // RFC 6570 matching of resource templates (the official Go SDK's own choice)
	go.etcd.io/bbolt v1.4.3 // the admission ledger: one file, transactional, crash-safe
)

require (
	cel.dev/expr v0.25.1 // indirect
	github.com/antlr4-go/antlr/v4 v4.13.1 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/decred/dcrd/dcrec/secp256k1/v4 v4.4.1 // indirect
	github.com/ebitengine/purego v0.11.2 // indirect
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/goccy/go-json v0.11.2 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/lestrrat-go/blackmagic v1.0.4 // indirect
	github.com/lestrrat-go/dsig v1.4.0 // indirect
	github.com/lestrrat-go/dsig-secp256k1 v1.0.0 // indirect
	github.com/lestrrat-go/httpcc v1.0.1 // indirect
	github.com/lestrrat-go/httprc/v3 v3.0.6 // indirect
	github.com/lestrrat-go/option/v2 v2.0.0 // indirect
	github.com/lufia/plan9stats v0.0.0-20211012122336-39d0f177ccd0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/power-devops/perfstat v0.0.0-20260805114148-88456608a4f6 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/segmentio/asm v1.2.1 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/tklauser/go-sysconf v0.4.0 // indirect
	github.com/tklauser/numcpus v0.12.0 // indirect
	github.com/valyala/fastjson v1.6.10 // indirect
	github.com/yusufpapurcu/wmi v1.2.4 // indirect
	golang.org/x/exp v0.0.0-20240823005443-9b4947da3948 // indirect
	golang.org/x/oauth2 v0.37.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20240826202546-f6391c0de4c7 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240826202546-f6391c0de4c7 // indirect
)
