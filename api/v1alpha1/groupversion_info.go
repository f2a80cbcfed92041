// Package v1alpha1 contains the aerie.run/v1alpha1 API: the AgentSession resource, which
// asks the aerie controller to run one AI coding-agent session in a runner pod.
//
// +kubebuilder:object:generate=true
// +groupName=aerie.run
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "aerie.run", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group-version to a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
