// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

// Package scheme registers sluice's plugin args with kube-scheduler. Import
// it for its side effect; the registry package does.
//
// kube-scheduler uses two schemes for plugin args: the config scheme
// decodes a KubeSchedulerConfiguration (strictly: an unknown field is an
// error naming it), and a separate plugin-args scheme defaults the decoded
// args and converts them to the internal types that plugins receive. Args
// must be in both, or decoding succeeds and conversion fails.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	kubeschedulerconfigv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"

	"github.com/sluice-sched/sluice/pkg/apis/config"
	configv1 "github.com/sluice-sched/sluice/pkg/apis/config/v1"
)

func init() {
	AddToScheme(kubeschedulerscheme.Scheme)
	AddToScheme(kubeschedulerconfigv1.GetPluginArgConversionScheme())
}

// AddToScheme adds the internal and v1 args types, their defaults and
// conversions to s.
func AddToScheme(s *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(s))
	utilruntime.Must(configv1.AddToScheme(s))
}
