// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package traces reads the public cluster traces that sluice's simulator,
// tests and benchmarks replay: the Alibaba openb GPU trace used by the FGD
// paper, the Tiresias job and cluster files, the Alibaba Lingjun network
// topology, the Alibaba 2025 disaggregated DLRM inference trace and the Acme
// cluster summary.
//
// Every reader takes an io.Reader and a name for error messages, checks the
// CSV header by column name (so a reordered file reads the same and a missing
// or unknown column is an error at line 1), parses every field strictly and
// returns typed records. Errors are *ParseError values naming the file, line
// and column:
//
//	openb_pod_list_default.csv:17: num_gpu "x": not an integer
//
// ReadFile runs any reader on a file path.
package traces
