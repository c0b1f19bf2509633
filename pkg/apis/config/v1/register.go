// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is kube-scheduler's config group, which plugin args share.
const GroupName = "kubescheduler.config.k8s.io"

// SchemeGroupVersion is the version users write.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

var (
	localSchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs)
	// AddToScheme adds the v1 args types, their defaults and conversions.
	AddToScheme = localSchemeBuilder.AddToScheme
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
