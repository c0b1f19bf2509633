#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# update-codegen.sh - regenerate deepcopy, conversion and defaulter code with
# the code-generator pinned in go.mod (tool dependencies; nothing downloaded
# beyond the module proxy).
set -euo pipefail
cd "$(dirname "$0")/.."

header=hack/boilerplate.go.txt
deepcopy=(./pkg/apis/config ./pkg/apis/config/v1 ./pkg/apis/podgroup/v1alpha1 ./pkg/apis/claims/v1alpha1)
versioned=(./pkg/apis/config/v1)

existing=()
for p in "${deepcopy[@]}"; do [ -d "$p" ] && existing+=("$p"); done

go tool deepcopy-gen --go-header-file "$header" --output-file zz_generated.deepcopy.go "${existing[@]}"
go tool conversion-gen --go-header-file "$header" --output-file zz_generated.conversion.go "${versioned[@]}"
go tool defaulter-gen --go-header-file "$header" --output-file zz_generated.defaults.go "${versioned[@]}"
