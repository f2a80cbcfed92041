# aerie — run AI coding agents as Kubernetes jobs.

# Image for the controller and the runner (one image, two entrypoints).
IMG ?= ghcr.io/aerie-run/aerie:dev
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# Go test flags; `make test GOTESTFLAGS=-run=TestAgentSessionAPI` narrows a run.
GOTESTFLAGS ?=
# Benchmark flags; compare two runs with `bin/benchstat old.txt new.txt`.
BENCHFLAGS ?= -run='^$$' -bench=. -benchmem -count=6

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRDs and RBAC into config/, and copy the CRDs into the chart.
	$(CONTROLLER_GEN) rbac:roleName=aerie-controller crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	mkdir -p charts/aerie/crds
	cp config/crd/bases/*.yaml charts/aerie/crds/

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: verify-generated
verify-generated: manifests generate ## Fail if `make manifests generate` changes a tracked file.
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make manifests generate' and commit the result" >&2; exit 1; }

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: golangci-lint ## Run golangci-lint.
	$(GOLANGCI_LINT) run

.PHONY: envtest
envtest: ## Obtain the envtest binaries (kube-apiserver, etcd, kubectl) and print KUBEBUILDER_ASSETS.
	@hack/envtest.sh

.PHONY: test
test: vet ## Run every test (unit, envtest, PostgreSQL, SQLite) under the race detector.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go test -race -count=1 -timeout=40m $(GOTESTFLAGS) ./...

.PHONY: bench
bench: ## Run the benchmarks (needs the same dependencies as the tests).
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go test $(BENCHFLAGS) ./...

##@ Build

.PHONY: build
build: ## Build the aerie and aerie-controller binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

.PHONY: run
run: manifests generate ## Run the controller against the cluster of the current kubeconfig.
	go run ./cmd/aerie-controller

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMG) .

.PHONY: demo
demo: ## Run aerie's main job on its embedded defaults.
	@echo "make demo arrives with the controller: it will start a local control plane, the controller and a sample session." >&2
	@exit 1

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	$(KUBECTL) apply --server-side -f config/crd/bases

.PHONY: uninstall
uninstall: ## Uninstall the CRDs from the cluster of the current kubeconfig.
	$(KUBECTL) delete --ignore-not-found -f config/crd/bases

.PHONY: deploy
deploy: manifests ## Deploy the controller to the cluster of the current kubeconfig.
	$(KUBECTL) apply --server-side -k config/default

.PHONY: undeploy
undeploy: ## Remove the controller from the cluster of the current kubeconfig.
	$(KUBECTL) delete --ignore-not-found -k config/default

##@ Tools

LOCALBIN ?= $(shell pwd)/bin
$(LOCALBIN):
	mkdir -p $(LOCALBIN)

KUBECTL ?= kubectl
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
BENCHSTAT ?= $(LOCALBIN)/benchstat

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
BENCHSTAT_VERSION ?= v0.0.0-20260908200009-22c9c6c9d4da

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Download controller-gen into bin/.
$(CONTROLLER_GEN): $(LOCALBIN)
	$(call go-install-tool,$(CONTROLLER_GEN),sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Download golangci-lint into bin/.
$(GOLANGCI_LINT): $(LOCALBIN)
	$(call go-install-tool,$(GOLANGCI_LINT),github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

.PHONY: benchstat
benchstat: $(BENCHSTAT) ## Download benchstat into bin/.
$(BENCHSTAT): $(LOCALBIN)
	$(call go-install-tool,$(BENCHSTAT),golang.org/x/perf/cmd/benchstat,$(BENCHSTAT_VERSION))

# go-install-tool installs a Go tool at a pinned version as bin/<tool>-<version> and links
# bin/<tool> to it, so a version bump reinstalls and stale tools never linger.
# $1 - target path, $2 - package, $3 - version
define go-install-tool
@[ -f "$(1)-$(3)" ] && [ "$$(readlink -- "$(1)" 2>/dev/null)" = "$$(basename "$(1)-$(3)")" ] || { \
set -e; \
echo "Installing $(2)@$(3)" >&2; \
rm -f "$(1)"; \
GOBIN="$(LOCALBIN)" go install "$(2)@$(3)"; \
mv "$(LOCALBIN)/$$(basename "$(1)")" "$(1)-$(3)"; \
ln -sf "$$(basename "$(1)-$(3)")" "$(1)"; \
}
endef
