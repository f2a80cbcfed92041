// Package v1alpha1 contains the aerie.run/v1alpha1 API: the AgentSession resource, which
// asks the aerie controller to run one AI coding-agent session in a runner pod.
//
// +kubebuilder:object:generate=true
// +groupName=aerie.run
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "aerie.run", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group-version to a runtime.Scheme. It is built
	// on apimachinery alone, so importing the API does not pull in controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group-version to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &AgentSession{}, &AgentSessionList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
