# Everything runs from the Go module proxy: no other downloads.
export GOTOOLCHAIN := local
GO ?= go
BIN := bin

.PHONY: run test bench lint manifests build k8s vet requirements

## run: start a local control plane with a demo cluster and the operator reconciling it.
run: build k8s
	$(BIN)/democluster

# Packages whose tests run under the race detector: the controllers, the domain code they call
# concurrently and the operator process (which ran twice in one test process). The rest run
# without it (their envtest suites gain little and cost most).
RACE_PKGS := ./bootimage/... ./internal/... ./featuregates/... ./controllers/... ./cmd/bootimage-operator/

## test: vet, unit tests and the integration suites on a real kube-apiserver and etcd; the refresh
## module on its own (lowest versions) and with the MCO's (hack/ignition-v2.26), and its requirements;
## the reference refresh controller (refreshcontroller/, its own module) on the same kube-apiserver;
## the shipped manifests with Prometheus's parsers (test/manifests); requirements at or below the MCO's.
test: k8s vet requirements
	$(GO) test -count=1 -race -timeout 20m $(RACE_PKGS)
	$(GO) test -count=1 -timeout 20m ./internal/controllers/ -ginkgo.focus='against vcsim' # skipped under -race: internal/controllers/race_test.go
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -vxF "$$($(GO) list $(RACE_PKGS))")
	cd test/manifests && $(GO) test -count=1 ./...
	cd refresh && $(GO) test -race -count=1 ./...
	cd refreshcontroller && $(GO) test -race -count=1 ./...
	cd hack/ignition-v2.26 && $(GO) test -race -count=1 github.com/bootimage-operator/bootimage-operator/refresh/...
	@cd refresh && if $(GO) list -m all | grep -E '^(sigs.k8s.io/controller-runtime|k8s.io/client-go) '; then echo "refresh/ requires the modules above"; exit 1; fi
	@if $(GO) list -deps ./bootimage/... ./cpms/... | grep -E '^(sigs.k8s.io/controller-runtime|k8s.io/client-go)/'; then echo "the domain (bootimage/, cpms/) builds the packages above"; exit 1; fi
	@# A platform's decision links no cloud SDK: its adapter under bootimage/cloud/ (<platform>cloud) does.
	@if $(GO) list -deps $$($(GO) list ./bootimage/... ./cpms/... | grep -vE '/bootimage/cloud/[a-z]+cloud$$') | grep -E '^(github.com/aws/aws-sdk-go-v2/(service|aws/transport)|github.com/aws/smithy-go|cloud.google.com/go/compute|google.golang.org/api|github.com/vmware/govmomi)'; then echo "a decision package builds the cloud SDK packages above"; exit 1; fi
	@# Prometheus is in the module graph through containers/image's go.mod (as in the MCO's), never built.
	@cd refresh && if $(GO) list -deps ./... | grep -E '^github.com/prometheus/'; then echo "refresh/ builds the packages above"; exit 1; fi

## bench: benchmarks, as JSON test events on stdout (see bin/bench.json).
bench:
	@mkdir -p $(BIN)
	$(GO) test -run '^$$' -bench . -benchmem -json ./... | tee $(BIN)/bench.json
	cd refresh && $(GO) test -run '^$$' -bench . -benchmem -json ./... | tee -a ../$(BIN)/bench.json

# Go modules of the tree with code of their own: the root, refresh, the refresh controller and the
# manifest checks (tools modules aside).
MODULES := . refresh refreshcontroller test/manifests
# staticcheck, pinned in its tools module and built from the Go module proxy.
STATICCHECK := $(GO) tool -modfile=$(CURDIR)/hack/tools/staticcheck/go.mod staticcheck

## lint: gofmt, go vet and staticcheck on every module of the tree.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(STATICCHECK) ./...) || exit 1; done

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

## requirements: fail on a requirement of go.mod, refresh/go.mod or refreshcontroller/go.mod above the MCO's version
## (hack/mco-requirements.txt) that hack/newer-than-mco.txt does not name with a reason.
requirements:
	$(GO) run ./hack/check-requirements hack/mco-requirements.txt hack/newer-than-mco.txt go.mod refresh/go.mod refreshcontroller/go.mod

## manifests: copy the CRDs from the pinned openshift/api module into manifests/crds.
manifests:
	$(GO) run ./hack/copy-crds

build:
	$(GO) build -o $(BIN)/ ./cmd/... ./test/cmd/...

## k8s: build kube-apiserver, etcd and kubectl (for the runbook specs) from hack/tools when missing or stale.
k8s:
	bash hack/build-k8s.sh etcd kube-apiserver kubectl
