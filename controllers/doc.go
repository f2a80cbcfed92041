// Package controllers holds aerie's reconcilers: each observes one kind, computes the
// desired children (runner pod, layer ConfigMaps) with pure functions, applies them and
// writes status once per reconcile.
//
// The RBAC the controller manager is granted is generated from the markers in this package
// (`make manifests`); each reconciler declares what it needs beside its code.
//
// +kubebuilder:rbac:groups=aerie.run,resources=agentsessions,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=aerie.run,resources=agentsessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=aerie.run,resources=agentsessions/finalizers,verbs=update
// +kubebuilder:rbac:groups=core;events.k8s.io,resources=events,verbs=create;patch
package controllers
