// Package controllers holds aerie's reconcilers: each observes one kind, computes the
// desired children (runner pod, layer ConfigMaps) with pure functions, applies them and
// writes status once per reconcile.
//
// The RBAC the controller manager is granted is generated from the markers
// beside each reconciler (`make manifests`): each declares what it needs.
package controllers
