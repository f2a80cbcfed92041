# aerie — run AI coding agents as Kubernetes jobs.

# Images: the controller (distroless, aerie-controller alone) and the runner (aerie and the
# tools agents use), two targets of one Dockerfile.
IMAGE_REPO ?= ghcr.io/aerie-run
IMAGE_TAG ?= dev
CONTROLLER_IMG ?= $(IMAGE_REPO)/aerie-controller:$(IMAGE_TAG)
RUNNER_IMG ?= $(IMAGE_REPO)/aerie-runner:$(IMAGE_TAG)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# Go test flags; `make test GOTESTFLAGS=-run=TestAgentSessionAPI` narrows a run.
GOTESTFLAGS ?=
# Benchmark flags; compare two runs with `bin/benchstat old.txt new.txt`.
BENCHFLAGS ?= -run='^$$' -bench=. -benchmem -count=6
# How long each fuzz target runs in `make fuzz`.
FUZZTIME ?= 3s

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
manifests: controller-gen ## Generate the CRDs and RBAC into config/, and copy both into the chart.
	$(CONTROLLER_GEN) rbac:roleName=aerie-controller crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	mkdir -p charts/aerie/crds charts/aerie/files/rbac
	cp config/crd/bases/*.yaml charts/aerie/crds/
	cp config/rbac/role.yaml charts/aerie/files/rbac/role.yaml

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

.PHONY: node
node: ## Run a single-node cluster (real kubelet, containerd, runc; needs root) until Ctrl-C; CHECK=1 runs a pod and stops.
	@hack/node.sh >/dev/null
	go run ./hack/node $(if $(CHECK),-check)

.PHONY: e2e-node
e2e-node: ## Run the end-to-end tests on a real node with the images built from the Dockerfile (root, buildah, mmdebstrap; cold: about 15 minutes).
	@hack/node.sh >/dev/null
	@hack/images.sh >/dev/null
	AERIE_E2E_NODE=real KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go test -p 1 -count=1 -timeout=60m -v -run '$(E2E_NODE_RUN)' ./hack/testenv/ ./controllers/

# Tests make e2e-node runs, one package at a time (-p 1): they share the one node.
E2E_NODE_RUN ?= TestNode|TestEndToEnd

.PHONY: bench-node
bench-node: ## Measure apply -> runner pod Running -> first model request for 50 sessions on a real node (what make e2e-node needs).
	@hack/node.sh >/dev/null
	@hack/images.sh >/dev/null
	AERIE_E2E_NODE=real KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go test -run='^$$' -bench=BenchmarkNodeSessionStartup -benchtime=1x -count=1 -timeout=30m ./controllers/

.PHONY: test
test: vet chart-tools ## Run every test (unit, envtest, PostgreSQL, SQLite, chart and kustomize) under the race detector.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go test -race -count=1 -timeout=40m $(GOTESTFLAGS) ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 3s); a failing input lands in the package's testdata/fuzz/.
	FUZZTIME="$(FUZZTIME)" hack/fuzz.sh

# Multiplier of the fault suite's sessions and faults; 1 is the bounded run.
FAULTS_SCALE ?= 1

.PHONY: test-faults
test-faults: ## Run the fault-injection suite (hack/faults) and print its counts; FAULTS_SCALE=N for a longer run.
	AERIE_FAULTS=1 FAULTS_SCALE="$(FAULTS_SCALE)" go test -count=1 -timeout=60m -v ./hack/faults/

.PHONY: bench
bench: ## Run the benchmarks (needs the same dependencies as the tests).
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go test $(BENCHFLAGS) ./...

# Flags of hack/loadbench, e.g. LOADBENCHFLAGS='-runs 5 -controllers aerie,job-unlimited'.
LOADBENCHFLAGS ?=

.PHONY: bench-controller
bench-controller: build ## Compare create → pod for 300 AgentSessions (aerie-controller) and 300 Jobs (kube-controller-manager; built the first time, several minutes).
	KUBEBUILDER_ASSETS="$$(AERIE_ENVTEST_EXTRA=kube-controller-manager hack/envtest.sh)" go run ./hack/loadbench -aerie-controller bin/aerie-controller $(LOADBENCHFLAGS)

##@ Build

.PHONY: build
build: ## Build the aerie, kubectl-aerie and aerie-controller binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

.PHONY: run
run: manifests generate ## Run the controller against the cluster of the current kubeconfig.
	go run ./cmd/aerie-controller

.PHONY: docker-build
docker-build: ## Build the controller and runner images (needs a Docker engine).
	docker build --target controller --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(CONTROLLER_IMG) .
	docker build --target runner --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(RUNNER_IMG) .

.PHONY: images-local
images-local: ## Build the controller and runner images from the Dockerfile with buildah and local bases, no registry (root, buildah, mmdebstrap).
	hack/images.sh

.PHONY: docker-push
docker-push: ## Push the controller and runner images.
	docker push $(CONTROLLER_IMG)
	docker push $(RUNNER_IMG)

.PHONY: demo
demo: ## Run aerie's main job locally: control plane, controller, pod runner and a sample session (KEEP=1 keeps it up; NODE=real on a real node).
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/ ./cmd/aerie ./cmd/kubectl-aerie
	go build -o bin/aerie-demo ./hack/demo
	$(if $(filter real,$(NODE)),AERIE_E2E_NODE=real) KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" bin/aerie-demo -aerie bin/aerie

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

.PHONY: kind-demo
kind-demo: ## Try aerie on a kind cluster (needs Docker): build, load, install the chart, run a sample session; KEEP=1 keeps the cluster.
	hack/kind.sh

.PHONY: undeploy
undeploy: ## Remove the controller from the cluster of the current kubeconfig.
	$(KUBECTL) delete --ignore-not-found -k config/default

##@ Tools

LOCALBIN ?= $(shell pwd)/bin
# Built tools are cached outside the repository as well (see go-install-tool).
TOOLS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/aerie/tools
$(LOCALBIN):
	mkdir -p $(LOCALBIN)

KUBECTL ?= kubectl
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
BENCHSTAT ?= $(LOCALBIN)/benchstat
HELM ?= $(LOCALBIN)/helm
KUSTOMIZE ?= $(LOCALBIN)/kustomize
KIND ?= $(LOCALBIN)/kind

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
BENCHSTAT_VERSION ?= v0.0.0-20260908200009-22c9c6c9d4da
HELM_VERSION ?= v3.22.0
KUSTOMIZE_VERSION ?= v5.8.2
KIND_VERSION ?= v0.33.0
# The Kubernetes release helm assumes when no cluster is asked (`helm template`, `helm lint`):
# built from source without these ldflags it would assume 1.20. Keep it at the release of the
# k8s.io modules in go.mod (and of hack/testenv's control plane).
HELM_KUBE_MINOR ?= 37
# prometheus-operator's monitoring API: the ServiceMonitor CRD the chart tests install is
# generated from its Go types, at the release the chart is written against.
PROMETHEUS_OPERATOR_APIS_VERSION ?= v0.95.2

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

.PHONY: helm
helm: $(HELM) ## Build helm into bin/ (from its Go module, with the Kubernetes release set).
$(HELM): $(LOCALBIN)
	$(call go-install-tool,$(HELM),helm.sh/helm/v3/cmd/helm,$(HELM_VERSION),-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_KUBE_MINOR) -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_KUBE_MINOR))

.PHONY: kustomize
kustomize: $(KUSTOMIZE) ## Build kustomize into bin/.
$(KUSTOMIZE): $(LOCALBIN)
	$(call go-install-tool,$(KUSTOMIZE),sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION))

.PHONY: kind
kind: $(KIND) ## Build kind into bin/ (hack/kind.sh uses it; it needs a Docker engine to run).
$(KIND): $(LOCALBIN)
	$(call go-install-tool,$(KIND),sigs.k8s.io/kind,$(KIND_VERSION))

SERVICEMONITOR_CRD ?= $(LOCALBIN)/crds/monitoring.coreos.com_servicemonitors-$(PROMETHEUS_OPERATOR_APIS_VERSION).yaml

.PHONY: servicemonitor-crd
servicemonitor-crd: $(SERVICEMONITOR_CRD) ## Generate prometheus-operator's ServiceMonitor CRD into bin/crds/ (the chart tests install it).
$(SERVICEMONITOR_CRD): | $(CONTROLLER_GEN)
	@cached="$(TOOLS_CACHE)/crds/$(notdir $@)"; \
	[ -s "$$cached" ] || hack/servicemonitor-crd.sh "$(CONTROLLER_GEN)" "$(PROMETHEUS_OPERATOR_APIS_VERSION)" "$$cached"; \
	mkdir -p "$(dir $@)"; \
	cp "$$cached" "$@"

.PHONY: chart-tools
chart-tools: helm kustomize servicemonitor-crd ## Everything the chart and kustomize tests need, in bin/.

# go-install-tool installs a Go tool at a pinned version as bin/<tool>-<version> and links
# bin/<tool> to it, so a version bump reinstalls and stale tools never linger. Built tools are
# kept in TOOLS_CACHE too, so a fresh clone (as CI makes) copies them instead of linking again.
# $1 - target path, $2 - package, $3 - version, $4 - optional -ldflags
define go-install-tool
@[ -f "$(1)-$(3)" ] && [ "$$(readlink -- "$(1)" 2>/dev/null)" = "$$(basename "$(1)-$(3)")" ] || { \
set -e; \
cached="$(TOOLS_CACHE)/$$(basename "$(1)-$(3)")"; \
rm -f "$(1)"; \
if [ -x "$$cached" ]; then \
cp "$$cached" "$(1)-$(3)"; \
else \
echo "Installing $(2)@$(3)" >&2; \
GOBIN="$(LOCALBIN)" go install -ldflags "$(4)" "$(2)@$(3)"; \
mv "$(LOCALBIN)/$$(basename "$(1)")" "$(1)-$(3)"; \
mkdir -p "$(TOOLS_CACHE)"; \
cp "$(1)-$(3)" "$$cached.tmp.$$$$" && mv "$$cached.tmp.$$$$" "$$cached"; \
fi; \
ln -sf "$$(basename "$(1)-$(3)")" "$(1)"; \
}
endef
