// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package sim

import (
	"errors"
	"fmt"
)

// Check says what in the report is wrong for a run that must show the
// whole story (smoke runs): every experiment produced figures for every
// policy, every gang was placed, and a scenario moved production to the
// overflow node and every moved pod came back.
func (r *Report) Check() error {
	var errs []error
	for _, f := range r.FGD {
		if len(f.Points) == 0 || f.Pods == 0 {
			errs = append(errs, fmt.Errorf("fgd, %s: no measurement points", f.Policy))
		}
	}
	for workload, results := range r.Gangs {
		for _, g := range results {
			s := g.Summary()
			if s.Gangs == 0 || s.Placed != s.Gangs {
				errs = append(errs, fmt.Errorf("%s, %s: %d of %d gangs placed", workload, g.Policy, s.Placed, s.Gangs))
			}
		}
	}
	for _, p := range r.Packing {
		if p.Pods == 0 || p.Placed != p.Pods {
			errs = append(errs, fmt.Errorf("dlrm, %s: %d of %d pods placed", p.Policy, p.Placed, p.Pods))
		}
	}
	for _, s := range r.Scenario {
		moved, back := s.Evictions["preemption"], s.Evictions["return"]
		if moved == 0 {
			errs = append(errs, fmt.Errorf("scenario %s: no production pod moved to the overflow node", s.Name))
		}
		if back != moved {
			errs = append(errs, fmt.Errorf("scenario %s: %d pods moved to the overflow node, %d came back", s.Name, moved, back))
		}
		if len(s.GangRunning) == 0 {
			errs = append(errs, fmt.Errorf("scenario %s: no gang ran", s.Name))
		}
		for g, leaves := range s.GangLeaves {
			if bound := s.GangLowerBound[g]; leaves > bound {
				errs = append(errs, fmt.Errorf("scenario %s: gang %s spans %d leaves, its lower bound is %d", s.Name, g, leaves, bound))
			}
		}
	}
	return errors.Join(errs...)
}
