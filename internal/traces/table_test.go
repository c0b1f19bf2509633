// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// checkRecords fails t with the first record where got and want differ.
func checkRecords[T any](t *testing.T, got, want []T) {
	t.Helper()
	for i := 0; i < len(got) && i < len(want); i++ {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
}

// readCase is one table row for a reader: an input, and the records it
// yields or the ParseError it reports.
type readCase[T any] struct {
	name    string
	input   string
	want    []T
	wantErr string
}

// runReadCases runs read on every case's input, named file.
func runReadCases[T any](t *testing.T, file string, read func(io.Reader, string) ([]T, error), cases []readCase[T]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := read(strings.NewReader(tt.input), file)
			if tt.wantErr != "" {
				checkParseError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, got, tt.want)
		})
	}
}

// checkParseError fails t unless err is a *ParseError whose text is want.
func checkParseError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %q", want)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("got %T %q, want a *ParseError", err, err)
	}
	if err.Error() != want {
		t.Fatalf("got error\n  %s\nwant\n  %s", err, want)
	}
}

// readerErrors are the header and file problems every reader reports the
// same way; each reader's name and a valid header for it.
var readerHeaders = []struct {
	reader string
	header string
	read   func(io.Reader, string) error
}{
	{"ReadOpenbNodes", "sn,cpu_milli,memory_mib,gpu,model", func(r io.Reader, n string) error { _, err := ReadOpenbNodes(r, n); return err }},
	{"ReadOpenbPods", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", func(r io.Reader, n string) error { _, err := ReadOpenbPods(r, n); return err }},
	{"ReadTiresiasJobs", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval", func(r io.Reader, n string) error { _, err := ReadTiresiasJobs(r, n); return err }},
	{"ReadTiresiasCluster", "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node", func(r io.Reader, n string) error { _, err := ReadTiresiasCluster(r, n); return err }},
	{"ReadLingjunTopology", "ip,DSW,PSW,ASW", func(r io.Reader, n string) error { _, err := ReadLingjunTopology(r, n); return err }},
	{"ReadDLRMInstances", "instance_sn,role,app_name,cpu_request,gpu_request,memory_request,max_instance_per_node,creation_time,scheduled_time,deletion_time", func(r io.Reader, n string) error { _, err := ReadDLRMInstances(r, n); return err }},
	{"ReadAcmeSummary", "id,gpu_job_num,avg_gpu_num,med_gpu_num,max_gpu", func(r io.Reader, n string) error { _, err := ReadAcmeSummary(r, n); return err }},
}

func TestReadersRejectBadFiles(t *testing.T) {
	for _, rh := range readerHeaders {
		columns := strings.Split(rh.header, ",")
		tests := []struct {
			name  string
			input string
			want  string
		}{
			{"empty file", "", "f.csv: empty file: no header"},
			{"header only", rh.header + "\n", "f.csv: no data rows after the header"},
			{
				"missing first column",
				strings.Join(columns[1:], ",") + "\n",
				fmt.Sprintf("f.csv:1: missing column %q in header %q", columns[0], strings.Join(columns[1:], ",")),
			},
			{
				"unknown column",
				rh.header + ",colour\n",
				`f.csv:1: unknown column "colour" in header (known columns: `,
			},
			{
				"repeated column",
				rh.header + "," + columns[1] + "\n",
				fmt.Sprintf("f.csv:1: column %q appears twice in header (columns 2 and %d)", columns[1], len(columns)+1),
			},
			{
				"row with too few fields",
				rh.header + "\n" + strings.Repeat("1,", len(columns)-2) + "1\n",
				"f.csv:2: wrong number of fields",
			},
			{
				"bare quote",
				rh.header + "\n" + `a"b` + strings.Repeat(",1", len(columns)-1) + "\n",
				`f.csv:2: column 2: bare " in non-quoted-field`,
			},
		}
		for _, tt := range tests {
			t.Run(rh.reader+"/"+tt.name, func(t *testing.T) {
				err := rh.read(strings.NewReader(tt.input), "f.csv")
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("got %v, want a *ParseError", err)
				}
				if !strings.HasPrefix(err.Error(), tt.want) {
					t.Fatalf("got error\n  %s\nwant it to start with\n  %s", err, tt.want)
				}
			})
		}
	}
}

func TestReadFile(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		wantErr string
	}{
		{"reads a file", filepath.Join("testdata", "openb", "openb_node_list_gpu_node.csv"), ""},
		{"missing file", filepath.Join("testdata", "no_such.csv"), "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, err := ReadFile(tt.path, ReadOpenbNodes)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) == 0 {
				t.Fatal("got no nodes")
			}
		})
	}
}

func TestReadFileNamesThePathInErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods.csv")
	if err := os.WriteFile(path, []byte("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,x,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path, ReadOpenbPods)
	checkParseError(t, err, path+`:2: num_gpu "x": not an integer`)
}
