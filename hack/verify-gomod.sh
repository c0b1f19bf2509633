#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# verify-gomod.sh - fail when `go mod tidy` or hack/update-k8s.sh would
# change go.mod or go.sum.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
./hack/update-k8s.sh "$version" 2>/dev/null
go mod tidy
if ! git diff --quiet -- go.mod go.sum; then
  echo "go.mod/go.sum are not tidy or the k8s replace block is stale; run 'hack/update-k8s.sh $version && go mod tidy':" >&2
  git diff --stat -- go.mod go.sum >&2
  exit 1
fi
