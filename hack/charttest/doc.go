// Package charttest checks what aerie deploys: the Helm chart in charts/aerie, the kustomize
// configuration in config/, and the sample manifests hack/kind.sh applies. Its tests render
// them with the pinned helm and kustomize in bin/ (`make chart-tools`) and hand every object to
// a real kube-apiserver (hack/testenv), so a field the API rejects, a pod that breaks Pod
// Security "restricted" or RBAC that drifts from the controller's markers fails `make test`.
//
// The package has no code besides its tests.
package charttest
