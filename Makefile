# mcp-bastion developer targets. Every target pins the Go toolchain.
export GOTOOLCHAIN := go1.26.10

BIN := bin

.PHONY: help build test lint fuzz bench demo check clean

help: ## list targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build bin/bastion and bin/refund (the example server)
	go build -o $(BIN)/bastion ./cmd/bastion
	go build -o $(BIN)/refund ./examples/refund

test: ## install what tests need, then gates, go test -race ./... and brief fuzzing
	scripts/test.sh

lint: ## gofmt, go vet, staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

fuzz: ## run every fuzz target for FUZZTIME (default 60s) each
	FUZZTIME=$${FUZZTIME:-60s} scripts/fuzz.sh

bench: ## micro-benchmarks, libpg_query's C floor, the whole-process load comparison and the gateway load benchmark
	go test -run='^$$' -bench=. -benchmem ./internal/...
	bench/libpgquery/run.sh
	bench/run-load.sh
	bench/run-gateway-load.sh

demo: ## run bastion serve on the embedded default, then bastion gateway in front of it and examples/refund
	scripts/demo.sh

check: lint test ## everything CI runs

clean: ## remove build output
	rm -rf $(BIN)
