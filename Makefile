# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
BIN := bin

K8S_VERSION := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
K8S_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(K8S_VERSION))))
K8S_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(K8S_VERSION))))
SLUICE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-unknown)
IMAGE_REPO ?=
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
GIT_TREE_STATE := $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo clean || echo dirty)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)

VERSION_PKG := k8s.io/component-base/version
LDFLAGS := -s -w \
	-X '$(VERSION_PKG).gitVersion=$(K8S_VERSION)' \
	-X '$(VERSION_PKG).gitMajor=$(K8S_MAJOR)' \
	-X '$(VERSION_PKG).gitMinor=$(K8S_MINOR)' \
	-X '$(VERSION_PKG).gitCommit=$(GIT_COMMIT)' \
	-X '$(VERSION_PKG).gitTreeState=$(GIT_TREE_STATE)' \
	-X '$(VERSION_PKG).buildDate=$(BUILD_DATE)' \
	-X '$(VERSION_PKG)/verflag.programName=sluice-scheduler $(SLUICE_VERSION) built on Kubernetes'

# Pinned linter, installed into bin/ by `make verify` itself.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)

UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/)
# The longest packages first: two run at a time, so the short ones fill in.
INTEGRATION_PKGS = $(shell $(GO) list ./test/integration/overflow ./test/integration/slurm ./test/integration/overflownode) \
	$(filter-out %/integration/overflow %/integration/slurm %/integration/overflownode,$(shell $(GO) list ./test/integration/...))

.PHONY: all build tools demo demo-smoke test unit fuzz integration soak binary monitoring smoke bench bench-doc bench-smoke sim sim-smoke verify codegen image image-docker release e2e print-version clean

all: build

## build: bin/sluice-scheduler, bin/sluice-overflow-node and the kubectl
## plugin bin/kubectl-sluice (`kubectl sluice` with bin/ on PATH)
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/sluice-scheduler ./cmd/sluice-scheduler
	CGO_ENABLED=0 $(GO) build -ldflags "-s -w -X main.version=$(SLUICE_VERSION)" -o $(BIN)/sluice-overflow-node ./cmd/sluice-overflow-node
	CGO_ENABLED=0 $(GO) build -ldflags "-s -w" -o $(BIN)/kubectl-sluice ./cmd/kubectl-sluice

## tools: the simulator, the benchmark report and the demo
tools:
	$(GO) build -o $(BIN)/sluice-sim ./cmd/sluice-sim
	$(GO) build -o $(BIN)/sluice-benchreport ./cmd/sluice-benchreport
	$(GO) build -o $(BIN)/sluice-demo ./cmd/sluice-demo

## demo: the whole story on this machine (KEEP=1 leaves the cluster up,
## SLURM=1 also reads a real Slurm started by hack/slurm-up.sh)
KEEP ?=
SLURM ?=
DEMO_FLAGS ?=
DEMO_KEEP = $(if $(KEEP),-keep -kubectl $(BIN)/kubectl)
demo: build tools $(if $(KEEP),$(BIN)/kubectl)
	@if [ -n "$(SLURM)" ]; then ./hack/slurm-up.sh >/dev/null && . $${SLURM_CI_DIR:-/tmp/slurm-ci}/slurm.env && \
		./$(BIN)/sluice-demo -slurm $(DEMO_KEEP) $(DEMO_FLAGS); \
	else ./$(BIN)/sluice-demo $(DEMO_KEEP) $(DEMO_FLAGS); fi

## bin/kubectl: upstream's kubectl at the Kubernetes version sluice builds
## on, for the cluster `make demo KEEP=1` leaves up (its own module,
## hack/kubectl, so the scheduler's dependencies stay as they are)
$(BIN)/kubectl: hack/kubectl/go.mod hack/kubectl/main.go
	cd hack/kubectl && $(GO) build -ldflags "-X k8s.io/component-base/version.gitVersion=v1.37.2" -o $(abspath $(BIN))/kubectl .

# The smoke run reads a real Slurm, as the Slurm integration tests do
# (hack/with-test-slurm.sh starts one unless one is running).
demo-smoke: build tools
	$(WITH_SLURM) bash -c '. $$SLURM_CI_DIR/slurm.env && ./$(BIN)/sluice-demo -smoke -plain -slurm -out _output/demo-smoke'
	grep -q 'Status: <b class="">passed' _output/demo-smoke/report.html
	@size=$$(stat -c %s _output/demo-smoke/report.html); echo "demo report: $$size bytes"; test $$size -lt 200000 || { echo "the demo report is $$size bytes, over 200 KB"; exit 1; }

## test: unit tests with the race detector, fuzzing, integration tests
## against a real apiserver and a real Slurm, and smoke runs of the binary,
## the benchmark, the simulator and the demo. It brings up the test Slurm
## itself (hack/with-test-slurm.sh: installs its Debian packages on first
## use, reuses a running one, stops only what it started).
WITH_SLURM := ./hack/with-test-slurm.sh
test:
	$(WITH_SLURM) $(MAKE) --no-print-directory unit fuzz integration binary monitoring smoke e2e

smoke: bench-smoke sim-smoke demo-smoke

unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

integration: $(BIN)/helm
	$(WITH_SLURM) $(GO) test -count=1 -timeout 40m $(INTEGRATION_PKGS)

# helm, pinned, built from source as a tool: the chart's lint, rendering and
# install tests run it (test/integration/foundation).
HELM_VERSION := v4.3.2
$(BIN)/helm: Makefile
	GOBIN=$(abspath $(BIN))/helm-tmp $(GO) install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm-tmp/helm $@ && rmdir $(BIN)/helm-tmp

## soak: claim/return cycles with faults injected (leader killed, overflow
## node NotReady, disruption controller down, a Deployment scaled mid-claim,
## a second claim at once, returns during a claim) against two real
## sluice-scheduler processes; `make test` runs one cycle of each (6).
SOAK_CYCLES ?= 20
soak:
	SLUICE_SOAK_CYCLES=$(SOAK_CYCLES) $(GO) test -count=1 -timeout 90m -v -run 'TestSoak$$' ./test/integration/overflow/

# Each fuzz target runs briefly; their seed corpora also run in `unit`.
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# fail a target with a bare "context deadline exceeded" at the deadline
# when a worker is slow to stop on a loaded machine (go.dev/issue/75804,
# fixed in Go 1.27; seen here on FuzzDecodeNodes with 0 execs/sec for 5 s).
FUZZTIME ?= 30000x
FUZZ_PKGS := ./pkg/slurm/ ./internal/traces/
fuzz:
	@for pkg in $(FUZZ_PKGS); do \
		for target in $$($(GO) test $$pkg -list 'Fuzz.*' | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) || exit 1; \
		done; \
	done

# The binary is kube-scheduler with sluice inside: its --help lists
# kube-scheduler's flags and --version names both versions.
# (Outputs are read whole before grep: `cmd | grep -q` fails under pipefail
# when grep exits before cmd has written everything.)
binary: build
	out=$$(./$(BIN)/sluice-scheduler --version) && grep -q '^sluice-scheduler .* built on Kubernetes $(K8S_VERSION)$$' <<<"$$out"
	out=$$(./$(BIN)/sluice-scheduler --help 2>&1) && grep -q -- '--leader-elect ' <<<"$$out" && grep -q -- '--config string' <<<"$$out"
	out=$$(./$(BIN)/sluice-overflow-node --version) && grep -q '^sluice-overflow-node ' <<<"$$out"
	@echo "binary ok: $$(./$(BIN)/sluice-scheduler --version); $$(./$(BIN)/sluice-overflow-node --version)"

## monitoring: the alerts and the dashboard (manifests/monitoring) pass
## Prometheus' own rule and PromQL parsers and name only metrics the
## binaries register (docs/metrics.md, which TestMetricNames keeps equal to
## them); hack/promcheck is a module of its own
ALERTS := SluiceSlurmFailSafe,SluiceOverflowProviderUnhealthy,SluiceClaimNearTimeout,SluiceProductionOnOverflowLong,SluiceGangPendingLong,SluiceOverflowNodeLeaseStale
monitoring:
	cd hack/promcheck && $(GO) test -count=1 . && $(GO) run . -metrics ../../docs/metrics.md \
		-rules ../../manifests/monitoring/prometheusrules.yaml -dashboard ../../manifests/monitoring/dashboard.json -require-alerts $(ALERTS)

## bench: the scale benchmark (test/bench on upstream's scheduler_perf):
## every workload under stock kube-scheduler, sluice's configuration and the
## ceiling, each in a scheduler of its own, BENCH_REPS times interleaved in
## rotated order, then the comparison table (BENCH_SCALE=0.2 for a fifth of
## the sizes, BENCH_CASES='GPUPods|FabricGangs' for some cases only). It
## prints each workload as it starts and ends.
BENCH_DIR ?= _output/bench
BENCH_LABEL ?= sluice
BENCH_SCALE ?= 1
BENCH_REPS ?= 3
BENCH_CASES ?= .*
BENCH_TIMEOUT ?= 300m
# BENCH_PROFILE=1: a CPU profile of every workload's run (scheduler_perf's
# -perf-cpuprofile, in BENCH_DIR), and beside each the functions of sluice's
# plugins and of the scheduling framework that took the most CPU (*.top).
BENCH_PROFILE ?=
bench: $(BIN)/etcd build tools
	@rm -rf $(BENCH_DIR) && mkdir -p $(BENCH_DIR)
	$(GO) test -c -ldflags "-X github.com/sluice-sched/sluice/test/bench.builtFrom=$$(git describe --always --dirty --abbrev=12)" -o $(BENCH_DIR)/bench.test ./test/bench
	@echo "bench: label $(BENCH_LABEL), scale $(BENCH_SCALE), $(BENCH_REPS) repetitions; scheduler_perf's output in $(BENCH_DIR)/bench.log"
	@cd test/bench && PATH="$(abspath $(BIN)):$$PATH" SLUICE_BENCH_DIR="$(abspath $(BENCH_DIR))" \
		"$(abspath $(BENCH_DIR))/bench.test" -test.run '^$$' -test.bench 'BenchmarkPerfScheduling/^($(BENCH_CASES))\.r[0-9]+\.' -test.benchtime=1x -test.timeout $(BENCH_TIMEOUT) \
		-perf-scheduling-label-filter=$(BENCH_LABEL) -data-items-dir="$(abspath $(BENCH_DIR))" \
		-sluice-scale=$(BENCH_SCALE) -sluice-reps=$(BENCH_REPS) $(if $(BENCH_PROFILE),-perf-cpuprofile) 2>&1 >>"$(abspath $(BENCH_DIR))/bench.log" \
		| tee -a "$(abspath $(BENCH_DIR))/bench.log" | grep --line-buffered '^bench: ' \
		|| { tail -n 60 "$(abspath $(BENCH_DIR))/bench.log"; echo "bench failed: $(BENCH_DIR)/bench.log"; exit 1; }
	./$(BIN)/sluice-benchreport -dir $(BENCH_DIR) -json $(BENCH_DIR)/results.json | tee $(BENCH_DIR)/report.md
	@$(if $(BENCH_PROFILE),for f in $(BENCH_DIR)/*cpu.prof; do \
		[ -e "$$f" ] || { echo "bench: BENCH_PROFILE is set but no run wrote a CPU profile"; exit 1; }; \
		$(GO) tool pprof -top -cum -nodecount=40 -focus 'sluice-sched/sluice/pkg|scheduler/framework|scheduler/schedule_one' "$$f" > "$$f.top" 2>&1; \
	done; echo "bench: CPU profiles in $(BENCH_DIR)/*cpu.prof and their top functions in *cpu.prof.top")

## bench-doc: keep the last `make bench` run's results in docs/bench and
## regenerate docs/benchmarks.md's table from them (a unit test checks the
## two agree)
bench-doc: tools
	./$(BIN)/sluice-benchreport -dir $(BENCH_DIR) -save docs/bench > /dev/null
	./$(BIN)/sluice-benchreport -doc docs/benchmarks.md -results docs/bench -write

# bench-smoke: one repetition (the rotation of repetitions is checked by
# TestWriteWorkloads); a second took 3-4 minutes of make test, most of it
# the ResearchClaim smoke under break-before-make.
bench-smoke:
	cd test/bench && $(GO) test -count=1 -run '^Test' .
	$(MAKE) bench BENCH_LABEL=sluice-smoke BENCH_DIR=_output/bench-smoke BENCH_REPS=1 BENCH_TIMEOUT=20m
	./$(BIN)/sluice-benchreport -dir _output/bench-smoke -check > /dev/null

$(BIN)/etcd: go.mod
	$(GO) build -o $@ go.etcd.io/etcd/server/v3

## sim: the trace-driven simulator on the public traces (SIM_DATA)
SIM_DATA ?= ../shared/data/traces
SIM_OUT ?= _output/sim
SIM_FLAGS ?= -scenario scenarios/research-claim.yaml
sim: tools
	@mkdir -p $(dir $(SIM_OUT))
	./$(BIN)/sluice-sim -data $(SIM_DATA) -out $(SIM_OUT) -log $(SIM_OUT).log $(SIM_FLAGS)

sim-smoke: tools
	@mkdir -p _output
	./$(BIN)/sluice-sim -data internal/traces/testdata -out _output/sim-smoke -log _output/sim-smoke.log \
		-experiments fgd,tiresias,dlrm,queue -queue-policies upstream-TopologyPlacement,sluice \
		-max-arrivals 15 -max-jobs 4 -dlrm-fill 0.05 -scenario scenarios/smoke.yaml -check

## verify: formatting, vet, lint, generated code and go.mod up to date
verify: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	./hack/verify-codegen.sh
	./hack/verify-gomod.sh

$(STATICCHECK):
	@mkdir -p $(BIN)
	GOBIN=$(abspath $(BIN))/staticcheck-tmp $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/staticcheck-tmp/staticcheck $@ && rmdir $(BIN)/staticcheck-tmp

## codegen: regenerate deepcopy/conversion/defaults
codegen:
	./hack/update-codegen.sh

## image: both images as OCI image layout tarballs in _output/images, with
## no Docker engine (hack/image): static binaries for IMAGE_PLATFORMS on an
## empty base, the CA bundle, non-root, version-labelled, reproducible from
## the commit; tagged $(IMAGE_REPO)NAME:$(SLUICE_VERSION) (local/ without
## IMAGE_REPO). Load one with `ctr -n k8s.io images import`.
comma := ,
IMAGE_DIR ?= _output/images
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# The CA bundle the images carry (Debian's path; elsewhere point at yours).
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
image:
	rm -rf _output/build && mkdir -p $(IMAGE_DIR)
	for p in $(subst $(comma), ,$(IMAGE_PLATFORMS)); do \
		GOOS=$${p%/*} GOARCH=$${p#*/} GOFLAGS=-trimpath $(MAKE) --no-print-directory build BIN=_output/build/$${p%/*}-$${p#*/} \
			BUILD_DATE=$$(date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ) || exit 1; \
	done
	for b in sluice-scheduler sluice-overflow-node; do \
		$(GO) run ./hack/image -name $$b -ref $(or $(IMAGE_REPO),local/)$$b:$(SLUICE_VERSION) -version $(SLUICE_VERSION) -ca-bundle $(CA_BUNDLE) \
			-revision $(GIT_COMMIT) -created $(SOURCE_DATE_EPOCH) \
			$(foreach p,$(subst $(comma), ,$(IMAGE_PLATFORMS)),-binary $(p)=_output/build/$(subst /,-,$(p))/$$b) \
			-o $(IMAGE_DIR)/$$b.oci.tar || exit 1; \
	done

## release: VERSION=vX.Y.Z writes every artifact of a release into
## _output/release/VERSION: both images (OCI tarballs, IMAGE_PLATFORMS,
## tagged $(IMAGE_REPO), default ghcr.io/sluice-sched/), the chart package
## and its OCI form, kubectl-sluice for PLUGIN_PLATFORMS with a krew
## manifest, RELEASE-NOTES.md (CHANGELOG, upgrade notes first), an SPDX
## SBOM and SHA256SUMS (hack/release)
PLUGIN_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
RELEASE_DIR = _output/release/$(VERSION)
release: $(BIN)/helm
	@[[ "$(VERSION)" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$$ ]] || { echo "set VERSION=vX.Y.Z (got '$(VERSION)')"; exit 1; }
	rm -rf $(RELEASE_DIR) _output/build/plugin && mkdir -p $(RELEASE_DIR)
	$(MAKE) --no-print-directory image SLUICE_VERSION=$(VERSION) IMAGE_REPO=$(or $(IMAGE_REPO),ghcr.io/sluice-sched/) IMAGE_DIR=$(RELEASE_DIR)
	for p in $(subst $(comma), ,$(PLUGIN_PLATFORMS)); do \
		d=_output/build/plugin/$${p%/*}-$${p#*/}; mkdir -p $$d && cp LICENSE $$d/ && \
		GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $$d/kubectl-sluice ./cmd/kubectl-sluice && \
		tar --sort=name --mtime=@$(SOURCE_DATE_EPOCH) --owner=0 --group=0 --numeric-owner -cf - -C $$d kubectl-sluice LICENSE | gzip -n \
			> $(RELEASE_DIR)/kubectl-sluice_$(VERSION)_$${p%/*}_$${p#*/}.tar.gz || exit 1; \
	done
	$(BIN)/helm package charts/sluice --version $(VERSION:v%=%) --app-version $(VERSION) -d $(RELEASE_DIR)
	$(GO) run ./hack/release -version $(VERSION) -dir $(RELEASE_DIR) -chart sluice-$(VERSION:v%=%).tgz -created $(SOURCE_DATE_EPOCH) \
		$(foreach p,$(subst $(comma), ,$(IMAGE_PLATFORMS)),-binary _output/build/$(subst /,-,$(p))/sluice-scheduler -binary _output/build/$(subst /,-,$(p))/sluice-overflow-node) \
		$(foreach p,$(subst $(comma), ,$(PLUGIN_PLATFORMS)),-binary _output/build/plugin/$(subst /,-,$(p))/kubectl-sluice -plugin $(p)=kubectl-sluice_$(VERSION)_$(subst /,_,$(p)).tar.gz)
	@ls -l $(RELEASE_DIR)

## image-docker: the same images with a Docker engine (the Dockerfile)
image-docker:
	docker build --build-arg SLUICE_VERSION=$(SLUICE_VERSION) --target sluice-scheduler -t $(IMAGE_REPO)sluice-scheduler:$(SLUICE_VERSION) .
	docker build --build-arg SLUICE_VERSION=$(SLUICE_VERSION) --target sluice-overflow-node -t $(IMAGE_REPO)sluice-overflow-node:$(SLUICE_VERSION) .

## image-push: multi-arch images (IMAGE_PLATFORMS), tagged with the version
## (git describe: vX.Y.Z on a release tag), pushed to IMAGE_REPO (needs
## Docker buildx and a registry login)
image-push:
	@test -n "$(IMAGE_REPO)" || { echo "set IMAGE_REPO, e.g. IMAGE_REPO=ghcr.io/sluice-sched/"; exit 1; }
	for target in sluice-scheduler sluice-overflow-node; do \
		docker buildx build --platform $(IMAGE_PLATFORMS) --build-arg SLUICE_VERSION=$(SLUICE_VERSION) \
			--target $$target -t $(IMAGE_REPO)$$target:$(SLUICE_VERSION) --push . || exit 1; \
	done

## e2e: sluice installed by its chart from its images on two real clusters
## on this machine (a real kubelet on containerd 2.x and runc each), then
## the story: production moves to the overflow node and back while it keeps
## answering through its Service (hack/e2e/run.sh says what it installs;
## E2E_KEEP=1 leaves the clusters up)
e2e:
	SLUICE_VERSION=$(SLUICE_VERSION) ./hack/e2e/run.sh

print-version:
	@echo $(SLUICE_VERSION)

clean:
	rm -rf $(BIN)
