// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package traces

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// ParseError is the error every reader returns for bad input. It names the
// file, the line and, when one field is at fault, the column and its value:
//
//	openb_pod_list_default.csv:17: num_gpu "x": not an integer
type ParseError struct {
	// File is the name the reader was given, usually the file's path.
	File string
	// Line is the 1-based line in the file; 0 when the file as a whole is at
	// fault (for example, it is empty).
	Line int
	// Column is the CSV column name at fault, empty for a whole-row problem.
	Column string
	// Value is the field's text when Column is set.
	Value string
	// Err says what is wrong.
	Err error
}

// Error formats the error as file:line: column "value": reason.
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Column != "" {
		fmt.Fprintf(&b, "%s %q: ", e.Column, e.Value)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the reason, so errors.Is works on it.
func (e *ParseError) Unwrap() error { return e.Err }

// ReadFile opens path and runs one of this package's readers on it, naming
// the file by path in errors:
//
//	pods, err := traces.ReadFile("openb/openb_pod_list_default.csv", traces.ReadOpenbPods)
func ReadFile[T any](path string, read func(r io.Reader, name string) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	return read(f, path)
}

// schema names the columns of one CSV format.
type schema struct {
	// required columns must be in the header.
	required []string
	// optional columns may be in the header; a field reads as "" when its
	// column is absent.
	optional []string
	// ignored columns are known to the format but not read.
	ignored []string
}

// table reads a CSV file whose first record is a header, giving access to
// fields by column name. A column that the schema does not know, a repeated
// column and a missing required column are all errors, so a renamed or
// dropped column is caught at the header rather than as wrong numbers later.
type table struct {
	name    string
	csv     *csv.Reader
	columns map[string]int
}

// newTable reads and checks the header of r against s.
func newTable(r io.Reader, name string, s schema) (*table, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, &ParseError{File: name, Err: errors.New("empty file: no header")}
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	known := map[string]bool{}
	for _, list := range [][]string{s.required, s.optional, s.ignored} {
		for _, c := range list {
			known[c] = true
		}
	}
	t := &table{name: name, csv: cr, columns: map[string]int{}}
	for i, c := range header {
		if i == 0 {
			// A byte-order mark that a spreadsheet left in front of the
			// first column name.
			c = strings.TrimPrefix(c, "\ufeff")
		}
		if !known[c] {
			return nil, &ParseError{File: name, Line: 1, Err: fmt.Errorf("unknown column %q in header (known columns: %s)", c, strings.Join(append(append(append([]string{}, s.required...), s.optional...), s.ignored...), ","))}
		}
		if first, dup := t.columns[c]; dup {
			return nil, &ParseError{File: name, Line: 1, Err: fmt.Errorf("column %q appears twice in header (columns %d and %d)", c, first+1, i+1)}
		}
		t.columns[c] = i
	}
	for _, c := range s.required {
		if _, ok := t.columns[c]; !ok {
			return nil, &ParseError{File: name, Line: 1, Err: fmt.Errorf("missing column %q in header %q", c, strings.Join(header, ","))}
		}
	}
	return t, nil
}

// next returns the next data row, or io.EOF after the last one.
func (t *table) next() (*row, error) {
	fields, err := t.csv.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, csvError(t.name, err)
	}
	line, _ := t.csv.FieldPos(0)
	return &row{table: t, fields: fields, line: line}, nil
}

// csvError turns an encoding/csv error into a ParseError naming the file.
func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		reason := pe.Err
		if pe.Column > 0 && !errors.Is(pe.Err, csv.ErrFieldCount) {
			reason = fmt.Errorf("column %d: %w", pe.Column, pe.Err)
		}
		return &ParseError{File: name, Line: pe.Line, Err: reason}
	}
	return &ParseError{File: name, Err: err}
}

// row is one data record. Its field getters record the first error and
// return zero values after it, so a reader can read every field of a row
// and check err once.
type row struct {
	table  *table
	fields []string
	line   int
	err    error
}

// fail records a problem with column c (or the row, when c is empty).
func (r *row) fail(c string, reason error) {
	if r.err != nil {
		return
	}
	pe := &ParseError{File: r.table.name, Line: r.line, Err: reason}
	if c != "" {
		pe.Column, pe.Value = c, r.text(c)
	}
	r.err = pe
}

// text returns the raw field of column c, "" when the column is absent.
func (r *row) text(c string) string {
	i, ok := r.table.columns[c]
	if !ok {
		return ""
	}
	return r.fields[i]
}

// name returns column c, which must not be empty.
func (r *row) name(c string) string {
	s := r.text(c)
	if s == "" {
		r.fail(c, errors.New("empty"))
	}
	return s
}

// int64 parses column c as a non-negative decimal integer.
func (r *row) int64(c string) int64 {
	if r.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(r.text(c), 10, 64)
	switch {
	case err != nil:
		r.fail(c, errors.New("not an integer"))
	case n < 0:
		r.fail(c, errors.New("negative"))
	}
	return n
}

// int parses column c as a non-negative integer that fits an int32, the
// range of every count in these traces.
func (r *row) int(c string) int {
	n := r.int64(c)
	if n > math.MaxInt32 {
		r.fail(c, errors.New("out of range"))
		return 0
	}
	return int(n)
}

// optionalInt64 is int64 but reads an empty field as 0.
func (r *row) optionalInt64(c string) int64 {
	if r.text(c) == "" {
		return 0
	}
	return r.int64(c)
}

// float parses column c as a finite, non-negative decimal number.
func (r *row) float(c string) float64 {
	if r.err != nil {
		return 0
	}
	f, err := strconv.ParseFloat(r.text(c), 64)
	switch {
	case err != nil:
		r.fail(c, errors.New("not a number"))
	case math.IsNaN(f) || math.IsInf(f, 0):
		r.fail(c, errors.New("not a finite number"))
	case f < 0:
		r.fail(c, errors.New("negative"))
	}
	return f
}

// optionalSeconds reads a time in seconds written as a decimal number,
// rounding it to the nearest second; an empty field reads as 0. The DLRM
// trace writes times with float noise, "475.00000000000006".
func (r *row) optionalSeconds(c string) int64 {
	if r.text(c) == "" {
		return 0
	}
	f := r.float(c)
	if f > math.MaxInt64/2 {
		r.fail(c, errors.New("out of range"))
		return 0
	}
	return int64(math.Round(f))
}

// readRows runs parse on every data row of a table, stopping at the first
// error. When unique is a column name, that column identifies a record (a
// node, pod or host name) and a repeated value is an error. A file with a
// header but no rows is an error: every trace has rows.
func readRows[T any](t *table, unique string, parse func(*row) T) ([]T, error) {
	var out []T
	firstLine := map[string]int{}
	for {
		r, err := t.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		v := parse(r)
		if unique != "" && r.err == nil {
			id := r.text(unique)
			if prev, dup := firstLine[id]; dup {
				r.fail(unique, fmt.Errorf("duplicate, first on line %d", prev))
			}
			firstLine[id] = r.line
		}
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, &ParseError{File: t.name, Err: errors.New("no data rows after the header")}
	}
	return out, nil
}
