// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// nodesResponse is the /nodes envelope of every supported version. Fields
// that changed shape between versions are decoded by hand.
type nodesResponse struct {
	// Nodes are decoded one by one: one node with a field of the wrong
	// type does not cost the others.
	Nodes      []json.RawMessage `json:"nodes"`
	LastUpdate flexNumber        `json:"last_update"`
	Errors     []responseError   `json:"errors"`
	Warnings   []responseError   `json:"warnings"`
	Meta       *json.RawMessage  `json:"meta"`
}

type rawNode struct {
	Name        string          `json:"name"`
	State       json.RawMessage `json:"state"`
	StateFlags  []string        `json:"state_flags"`
	Reason      string          `json:"reason"`
	Reservation string          `json:"reservation"`
	GRES        string          `json:"gres"`
	GRESUsed    string          `json:"gres_used"`
	Topology    string          `json:"topology"`
}

// responseError is an entry of "errors" or "warnings".
type responseError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	Source      string `json:"source"`
	Errno       *int   `json:"errno"`
	ErrorNumber *int   `json:"error_number"`
}

func (e responseError) String() string {
	parts := []string{}
	for _, s := range []string{e.Error, e.Description, e.Source} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	if n := e.Errno; n != nil {
		parts = append(parts, fmt.Sprintf("errno %d", *n))
	} else if n := e.ErrorNumber; n != nil {
		parts = append(parts, fmt.Sprintf("error %d", *n))
	}
	return strings.Join(parts, ", ")
}

// flexNumber is a number that slurmrestd sends plain (42), wrapped
// ({"set":true,"infinite":false,"number":42}), or as null; unset and
// infinite wrapped numbers read as 0.
type flexNumber int64

func (n *flexNumber) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		*n = 0
		return nil
	}
	if data[0] == '{' {
		var w struct {
			Set      bool  `json:"set"`
			Infinite bool  `json:"infinite"`
			Number   int64 `json:"number"`
		}
		if err := json.Unmarshal(data, &w); err != nil {
			return err
		}
		if !w.Set || w.Infinite {
			*n = 0
			return nil
		}
		*n = flexNumber(w.Number)
		return nil
	}
	var v json.Number
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("not a number: %s", data)
	}
	i, err := v.Int64()
	if err != nil {
		f, ferr := v.Float64()
		if ferr != nil {
			return err
		}
		i = int64(f)
	}
	*n = flexNumber(i)
	return nil
}

// decodeNodes parses a /nodes or /node/{name} response body. Problems with
// single nodes (an unparsable GRES string) are returned as warnings and the
// node is kept; only a body that is not a node response is an error.
func decodeNodes(body []byte) (nodes []Node, lastUpdate int64, warnings []string, err error) {
	var resp nodesResponse
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&resp); err != nil {
		return nil, 0, nil, fmt.Errorf("decoding nodes response: %w", err)
	}
	if len(resp.Errors) > 0 {
		// Whatever list came with it (often an empty one) is not the
		// cluster's: the answer is a failed poll.
		return nil, 0, nil, fmt.Errorf("slurmrestd answered with errors: %s", joinErrors(resp.Errors))
	}
	if resp.Nodes == nil {
		return nil, 0, nil, fmt.Errorf("decoding nodes response: no \"nodes\" field")
	}
	for i, raw := range resp.Nodes {
		var rn rawNode
		if err := json.Unmarshal(raw, &rn); err != nil {
			var named struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(raw, &named) != nil || named.Name == "" {
				warnings = append(warnings, fmt.Sprintf("nodes[%d] could not be read and has no name; ignored: %v", i, err))
				continue
			}
			// Fail safe for this node only: kept, and unhealthy.
			warnings = append(warnings, fmt.Sprintf("node %s (nodes[%d]) could not be read; it is kept as unreadable: %v", named.Name, i, err))
			nodes = append(nodes, Node{Name: named.Name, State: "UNKNOWN", Unreadable: true,
				Reason: fmt.Sprintf("sluice could not read this node's entry: %v", err)})
			continue
		}
		if rn.Name == "" {
			warnings = append(warnings, "a node without a name was ignored")
			continue
		}
		n := Node{Name: rn.Name, Reason: rn.Reason, Reservation: rn.Reservation, Topology: topologyUnits(rn.Topology)}
		words, serr := stateWords(rn.State)
		if serr != nil {
			warnings = append(warnings, fmt.Sprintf("node %s: state %s: %v", rn.Name, rn.State, serr))
		}
		n.setStates(append(words, rn.StateFlags...))
		var gerr error
		if n.GRES, gerr = ParseGRES(rn.GRES); gerr != nil {
			warnings = append(warnings, fmt.Sprintf("node %s: %v", rn.Name, gerr))
		}
		if n.GRESUsed, gerr = ParseGRES(rn.GRESUsed); gerr != nil {
			warnings = append(warnings, fmt.Sprintf("node %s: %v", rn.Name, gerr))
		}
		if len(n.UnknownStates) > 0 {
			warnings = append(warnings, fmt.Sprintf("node %s: unknown state %s", rn.Name, strings.Join(n.UnknownStates, ",")))
		}
		nodes = append(nodes, n)
	}
	for _, w := range resp.Warnings {
		warnings = append(warnings, "slurmrestd: "+w.String())
	}
	return nodes, int64(resp.LastUpdate), warnings, nil
}

// topologyUnits reads a node's "topology" (v0.0.43 on): one
// "topology:unit" per topology, comma separated; the units are kept.
func topologyUnits(s string) []string {
	var units []string
	for _, u := range strings.Split(s, ",") {
		if _, unit, ok := strings.Cut(u, ":"); ok {
			u = unit
		}
		if u = strings.TrimSpace(u); u != "" {
			units = append(units, u)
		}
	}
	return units
}

// stateWords reads "state": a string in v0.0.37/38 ("idle", "mixed") or a
// list of strings from v0.0.39 (["IDLE","DRAIN"]).
func stateWords(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return strings.FieldsFunc(s, func(r rune) bool { return r == '+' || r == ',' || r == ' ' }), nil
	case '[':
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
		return list, nil
	}
	return nil, fmt.Errorf("neither a string nor a list")
}

func joinErrors(errs []responseError) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.String()
	}
	return strings.Join(parts, "; ")
}
