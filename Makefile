# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
BIN := bin

K8S_VERSION := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
K8S_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(K8S_VERSION))))
K8S_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(K8S_VERSION))))
SLUICE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-unknown)
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
GIT_TREE_STATE := $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo clean || echo dirty)
BUILD_DATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)

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
INTEGRATION_PKGS = $(shell $(GO) list ./test/integration/...)

.PHONY: all build test unit fuzz integration binary verify codegen image clean

all: build

## build: bin/sluice-scheduler
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/sluice-scheduler ./cmd/sluice-scheduler

## test: unit tests with the race detector, integration tests against a real
## apiserver, and a smoke test of the built binary
test: unit fuzz integration binary

unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

integration:
	$(GO) test -count=1 -timeout 40m $(INTEGRATION_PKGS)

# Each fuzz target runs briefly; their seed corpora also run in `unit`.
FUZZTIME ?= 10s
fuzz:
	@for target in $$($(GO) test ./pkg/slurm/ -list 'Fuzz.*' | grep '^Fuzz'); do \
		echo "fuzz $$target ($(FUZZTIME))"; \
		$(GO) test ./pkg/slurm/ -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

# The binary is kube-scheduler with sluice inside: its --help lists
# kube-scheduler's flags and --version names both versions.
binary: build
	./$(BIN)/sluice-scheduler --version | grep -q '^sluice-scheduler .* built on Kubernetes $(K8S_VERSION)$$'
	./$(BIN)/sluice-scheduler --help 2>&1 | grep -q -- '--leader-elect '
	./$(BIN)/sluice-scheduler --help 2>&1 | grep -q -- '--config string'
	@echo "binary ok: $$(./$(BIN)/sluice-scheduler --version)"

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

## image: container image (needs a Docker engine)
image:
	docker build --build-arg SLUICE_VERSION=$(SLUICE_VERSION) -t sluice-scheduler:$(SLUICE_VERSION) .

clean:
	rm -rf $(BIN)
