// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is kube-scheduler's config group, which plugin args share.
const GroupName = "kubescheduler.config.k8s.io"

// SchemeGroupVersion is the internal version of sluice's plugin args.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

var (
	// SchemeBuilder registers the internal args types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the internal args types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&FabricTopologyArgs{},
		&GangArgs{},
		&SlurmNodeStateArgs{},
		&InferencePackingArgs{},
		&OverflowPreemptionArgs{},
	)
	return nil
}
