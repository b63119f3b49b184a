# fedgate — the two commands that matter: `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
BIN := bin/fedgate
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit the binary says it was built from (+dirty: with uncommitted changes).
COMMIT := $(shell git rev-parse HEAD 2>/dev/null)$(shell [ -n "$$(git status --porcelain 2>/dev/null)" ] && echo +dirty)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Tests that start servers get this long in total.
TEST_TIMEOUT ?= 25m
# Tools built by scripts/install-test-deps.sh (scripts/deploytools.sh) live here.
TOOLS_BIN ?= $(or $(FEDGATE_TESTENV_CACHE),$(HOME)/.cache/fedgate-testenv)/bin
STATICCHECK ?= $(TOOLS_BIN)/staticcheck
# The Helm chart's check: a Go module of its own (Helm and k8s.io stay out of fedgate's).
CHART_CHECK := deploy/helm/check

.PHONY: all build run deps test test-go test-chart test-cli test-release release fuzz bench soak lint clean

all: build

# CGO off and -trimpath as a release is built (scripts/release.sh): one static
# binary, and test-release then reuses these compiled packages.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/fedgate

## release: VERSION=vX.Y.Z [DIST=dir]: static linux/amd64 and linux/arm64 binaries, CycloneDX SBOMs and SHA256SUMS in DIST (default dist/VERSION); docs/deploy.md
release:
	@if [ -z "$(filter command line environment,$(origin VERSION))" ]; then echo "release: give VERSION=vX.Y.Z (make release VERSION=v0.1.0)" >&2; exit 2; fi
	./scripts/release.sh '$(VERSION)' $(DIST)

## run: a single-node region on embedded defaults: S3 on 127.0.0.1:9000, data under ./var
run: build
	./$(BIN) server

## deps: install what the tests need (scripts/install-test-deps.sh): idempotent, a few seconds when everything is there
deps:
	./scripts/install-test-deps.sh

## test: everything, including end-to-end tests with real S3 clients; installs what they need first (deps)
test: deps lint test-go test-chart test-cli test-release

## lint: gofmt, go vet and staticcheck (honnef.co/go/tools, installed by scripts/install-test-deps.sh), also over the chart check's own module (deploy/helm/check)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if [ ! -x "$(STATICCHECK)" ]; then \
	  echo "lint: staticcheck not found at $(STATICCHECK); run scripts/install-test-deps.sh (or scripts/deploytools.sh install staticcheck)" >&2; \
	  exit 1; fi
	$(STATICCHECK) ./...
	cd $(CHART_CHECK) && $(GO) vet ./... && $(STATICCHECK) ./...

test-go:
	$(GO) test -timeout $(TEST_TIMEOUT) -count=1 ./...

## test-chart: the Helm chart (deploy/helm/fedgate) rendered with the Helm Go library for 1, 3 and 5 replicas and its ci/ values, every manifest decoded strictly, its invariants, bin/fedgate's --check on what it renders, and helm lint --strict; a module of its own (docs/kubernetes.md)
test-chart: build
	cd $(CHART_CHECK) && $(GO) vet ./... && FEDGATE_BIN=$(abspath $(BIN)) $(GO) test -count=1 ./...

## test-cli: the aws CLI, s3cmd, rclone and boto3 at their defaults, ListBuckets of 1,350 buckets (CLI, boto3, paged with curl), a 10,000-file tree as a bucket (fs store), two peered regions (3 nodes + 1), and the Python client (clients/python) with PyTorch, against servers the scripts start
test-cli: build
	./scripts/test-awscli.sh ./$(BIN)
	./scripts/test-listbuckets.sh ./$(BIN)
	./scripts/test-tools.sh ./$(BIN)
	./scripts/test-fs-tree.sh ./$(BIN)
	./scripts/test-regions.sh ./$(BIN)
	./scripts/test-python-client.sh ./$(BIN)

## test-release: make release VERSION=v0.0.0-ci into a temp dir, then checks its checksums, both binaries' version and commit, and the SBOM
test-release:
	./scripts/test-release.sh

## fuzz: run every fuzz target for FUZZTIME each (seed corpora run in `make test`)
FUZZTIME ?= 30s
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

## bench: fedgate vs peers in the same run (docs/benchmarks.md): GET/PUT vs a plain file server, cold/warm origin reads, batch GET vs per-object GETs (fedgate and MinIO), Raft commits vs raw hashicorp/raft, write-back PUT vs fsynced copies and capped write-through, erasure-coded GET vs a plain file, the egress advisor vs SkyStore-style baselines on synthetic traces (docs/egress.md), fedgate mount vs plain files, a loopback FUSE mount, rclone mount and s3fs (root and /dev/fuse), the cache index's bytes per chunk and restart-to-ready at 10k/100k/1M chunks (~45 min)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s -timeout 150m ./bench/
	$(GO) test -run '^$$' -bench ErasureRead -benchtime 3x -timeout 10m ./federation/placement/
	$(GO) test -run '^$$' -bench IndexScale -benchtime 1x -timeout 30m ./cachetier/
	$(GO) test -count=1 -v -run '^TestSimulatorShapes$$' ./egress/

## soak: large objects and long runs kept out of `make test`, and the 15-minute chaos test (needs root)
soak:
	FEDGATE_SOAK=1 $(GO) test -timeout 120m -count=1 -v -run 'Soak|TestClusterWriteBackSurvivesKill|TestChaos$$' ./e2e/

clean:
	rm -rf bin
