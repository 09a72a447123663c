# kube-cdc — run `make help` for the targets.
SHELL := /usr/bin/env bash
GO ?= go
PKGS := ./...
# make test lists the slowest packages first (each starts its own servers): go test starts
# packages in the order given, four at a time, so these no longer start last and end late.
TEST_PKGS := ./e2e/ ./internal/testenv/ ./internal/sinks/postgres/ ./internal/integration/ ./internal/source/ ./internal/read/ui/ \
	./internal/deploytest/ ./internal/sinks/kafka/ ./...
# Packages whose tests start no server (fake clientsets and in-memory sinks at most).
UNIT_PKGS := ./internal/change/... ./internal/retry/... ./internal/layout/... ./internal/pipeline/... \
	./internal/config/... ./internal/envelope/... ./internal/metrics/... ./internal/leader/... \
	./internal/checkpoint/... ./internal/sinks/stdout/... ./internal/ignorepaths/... ./migrations/... ./cmd/...
# Tests that start servers take their binaries from here (see hack/testbin/build.sh).
export KUBE_CDC_TESTBIN ?= $(shell hack/testbin/build.sh --print-dir 2>/dev/null)

.DEFAULT_GOAL := help

# The build's identity (hack/version; RELEASING.md, "Versions"): the semantic version from
# the tag at HEAD or CHANGELOG.md, the commit, and the commit's time as the build date.
# Each is computed once, when first used (not by targets that do not build).
VERSION ?= $(eval VERSION := $(shell $(GO) run ./hack/version))$(VERSION)
COMMIT ?= $(eval COMMIT := $(shell $(GO) run ./hack/version -commit))$(COMMIT)
DATE ?= $(eval DATE := $(shell $(GO) run ./hack/version -date))$(DATE)
VERSION_PKG := github.com/kube-cdc/kube-cdc/internal/version
LDFLAGS := -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).Date=$(DATE)
RELEASE_PLATFORMS := linux/amd64 linux/arm64

help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

image: ## Build the container image kube-cdc:VERSION (needs a Docker engine).
	docker build -t kube-cdc:$(VERSION) --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) --build-arg DATE=$(DATE) .

build: ## Build bin/kube-cdc.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/kube-cdc ./cmd/kube-cdc

release: ## Build reproducible static binaries for linux/amd64 and linux/arm64 into dist/, with SHA256SUMS (RELEASING.md).
	@test -z "$$(git status --porcelain --untracked-files=no)" || { echo "make release: commit or stash the changes first (a release is built from a commit)"; git status --short --untracked-files=no; exit 1; }
	@case "$(VERSION)" in *[-+]*) echo "make release: $(VERSION) is a development build (no release tag at HEAD, or CHANGELOG.md's Unreleased lists changes); building it anyway";; \
	  *) chart=$$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' deploy/helm/kube-cdc/Chart.yaml); \
	     test "$$chart" = "$(VERSION)" || { echo "make release: deploy/helm/kube-cdc/Chart.yaml's appVersion is $$chart, the release $(VERSION) (RELEASING.md)"; exit 1; };; esac
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(RELEASE_PLATFORMS); do \
	  out=dist/kube-cdc_$(VERSION)_$${p%/*}_$${p#*/}; echo "$$out"; \
	  CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $$out ./cmd/kube-cdc; \
	done
	cd dist && sha256sum kube-cdc_* > SHA256SUMS && cat SHA256SUMS

print-ldflags:
	@echo '$(LDFLAGS)'

release-sums: ## Record the migrations release VERSION ships, with their SHA-256, in migrations/released.sums (RELEASING.md).
	@test -n "$(VERSION)" || { echo "make release-sums VERSION=x.y.z"; exit 1; }
	$(GO) run ./hack/releasesums -version $(VERSION)

testbin: ## Build kube-apiserver, etcd and etcdutl for the tests into a cache outside the repo (once).
	@hack/testbin/build.sh >/dev/null

test: testbin ## Run every test (unit, integration, end-to-end) with -race against real servers.
	@echo "go test -race: building the test binaries (a few minutes when the build cache is cold), then a line as each package starts and ends"
	@set -o pipefail; $(GO) test -race -count=1 -p 4 -timeout 40m -json $(TEST_PKGS) | $(GO) run ./hack/testprogress

test-unit: ## Run only the tests that need no server.
	$(GO) test -race -count=1 $(UNIT_PKGS)

upgrade-test: testbin ## Run the rolling upgrade under load (not part of make test; CI runs it): old and new kube-cdc replicas, 100 writes/s (docs/operations.md, "Upgrade").
	$(GO) test -race -count=1 -tags rollingupgrade -timeout 15m ./internal/upgradetest/rolling/

soak: testbin ## Run the soak (not part of make test): the nemesis's properties over KUBE_CDC_SOAK_FAULTS (default 220) faults of every kind, PostgreSQL and Kafka side by side.
	$(GO) test -tags soak -count=1 -run TestSoak -timeout 300m -v ./e2e/

lint: ## gofmt check and go vet (the soak's, the upgrade fixture's and the rolling upgrade's files, behind their build tags, too).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags soak ./e2e/
	$(GO) vet -tags upgradefixture ./internal/upgradetest/
	$(GO) vet -tags rollingupgrade ./internal/upgradetest/rolling/

bench: testbin ## Run the benchmarks against real servers; they print ratios against baselines measured in the same run (and the migrations since the release at 10M rows).
	$(GO) test -p 1 -run '^$$' -bench . -benchtime 1x -timeout 90m ./bench/...
	$(GO) test -run '^$$' -bench StoredChangedPathsWriteCost -benchtime 1x ./internal/sinks/postgres/

ui-assets: ## Rebuild the web UI's embedded chart library (internal/read/ui/static/uPlot.*) from internal/read/ui/web/package-lock.json (needs npm).
	cd internal/read/ui/web && npm ci --no-audit --no-fund --ignore-scripts
	cp internal/read/ui/web/node_modules/uplot/dist/uPlot.iife.min.js internal/read/ui/web/node_modules/uplot/dist/uPlot.min.css internal/read/ui/static/
	cp internal/read/ui/web/node_modules/uplot/LICENSE internal/read/ui/static/uPlot.LICENSE

demo: testbin build ## Start a throwaway cluster (KWOK nodes) and Postgres, stream a sample workload and a rollout into Postgres (Ctrl-C stops everything).
	$(GO) run ./hack/demo

.PHONY: help build image release release-sums print-ldflags testbin test test-unit upgrade-test soak lint bench demo ui-assets
