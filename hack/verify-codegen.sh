#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copyright 2026 The sluice Authors.
#
# verify-codegen.sh - fail when generated code is not what update-codegen.sh
# produces from the current sources.
set -euo pipefail
cd "$(dirname "$0")/.."
./hack/update-codegen.sh
if ! git diff --quiet -- '*zz_generated*' || [ -n "$(git ls-files --others --exclude-standard -- '*zz_generated*')" ]; then
  echo "generated code is out of date; run 'make codegen' and commit the result:" >&2
  git status --short -- '*zz_generated*' >&2
  exit 1
fi
