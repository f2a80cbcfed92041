package charttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aerie-run/aerie/hack/testenv"
)

// fieldOwner is the server-side apply field manager of everything the tests apply.
const fieldOwner = "aerie-chart-test"

// tools are the pinned binaries the tests run, built into bin/ by `make chart-tools`.
type tools struct {
	root      string // repository root
	helm      string
	kustomize string
	// serviceMonitorCRD is prometheus-operator's ServiceMonitor CRD, generated from its Go
	// types, so that the chart's ServiceMonitor meets the real schema.
	serviceMonitorCRD string
	// home isolates helm's cache, configuration and data from the user's.
	home string
}

// requireTools finds the pinned tools. A missing one fails the test with the command that
// provides it (or skips it under -short): a CI machine that lost them must go red.
func requireTools(t *testing.T) tools {
	t.Helper()
	root := testenv.RepoRoot(t)
	bin := filepath.Join(root, "bin")
	tl := tools{
		root:      root,
		helm:      filepath.Join(bin, "helm"),
		kustomize: filepath.Join(bin, "kustomize"),
		home:      t.TempDir(),
	}
	var missing []string
	for _, p := range []string{tl.helm, tl.kustomize} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	crds, _ := filepath.Glob(filepath.Join(bin, "crds", "monitoring.coreos.com_servicemonitors-*.yaml"))
	if len(crds) == 0 {
		missing = append(missing, filepath.Join(bin, "crds", "monitoring.coreos.com_servicemonitors-<version>.yaml"))
	} else {
		slices.Sort(crds)
		tl.serviceMonitorCRD = crds[len(crds)-1]
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("chart test tools missing: %s; run `make chart-tools` in the repository (`make test` runs it first)", strings.Join(missing, ", "))
		if testing.Short() {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	return tl
}

// path returns a repository path from its slash-separated relative name.
func (tl tools) path(rel string) string { return filepath.Join(tl.root, filepath.FromSlash(rel)) }

// run runs a tool and returns its standard output; a failure carries standard error.
func (tl tools) run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = tl.root
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(tl.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(tl.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(tl.home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &toolError{cmd: filepath.Base(name) + " " + strings.Join(args, " "), err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

// toolError is a tool that exited non-zero; stderr is what it said.
type toolError struct {
	cmd    string
	err    error
	stderr string
}

func (e *toolError) Error() string {
	return fmt.Sprintf("%s: %v: %s", e.cmd, e.err, strings.TrimSpace(e.stderr))
}

// helmTemplate renders the chart as release into namespace, with the chart's CRDs, for the
// Kubernetes release of the test control plane.
func (tl tools) helmTemplate(ctx context.Context, release, namespace string, valuesFiles ...string) (string, error) {
	args := []string{"template", release, tl.path("charts/aerie"), "--namespace", namespace,
		"--kube-version", testenv.KubernetesVersion, "--include-crds"}
	for _, f := range valuesFiles {
		args = append(args, "--values", tl.path(f))
	}
	return tl.run(ctx, tl.helm, args...)
}

// decode splits a stream of YAML documents into objects, dropping empty documents.
func decode(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode %s: %v", what, err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs
}

// readObjects decodes the YAML documents of a repository file.
func (tl tools) readObjects(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(tl.path(rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return decode(t, rel, data)
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", u.GetKind(), ns, u.GetName())
	}
	return fmt.Sprintf("%s %s", u.GetKind(), u.GetName())
}

// byKind returns the objects of a kind.
func byKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// kinds counts the objects of each kind.
func kinds(objs []*unstructured.Unstructured) map[string]int {
	n := map[string]int{}
	for _, u := range objs {
		n[u.GetKind()]++
	}
	return n
}

// convert turns an unstructured object into a typed one, refusing fields the type lacks.
func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &out, true); err != nil {
		t.Fatalf("%s: %v", describe(u), err)
	}
	return &out
}

// apply applies every object with server-side apply, in order, so that the API server
// validates each one completely: schema, defaulting, CEL rules, admission.
func apply(t *testing.T, cp *testenv.ControlPlane, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := t.Context()
	for _, u := range objs {
		ac := client.ApplyConfigurationFromUnstructured(u.DeepCopy())
		if err := cp.Client.Apply(ctx, ac, client.FieldOwner(fieldOwner)); err != nil {
			t.Errorf("server-side apply %s: %v", describe(u), err)
		}
	}
}

// requireNamespaces fails for every namespaced object without a namespace: `helm template |
// kubectl apply -f -` would put it into whatever namespace the kubeconfig names.
func requireNamespaces(t *testing.T, cp *testenv.ControlPlane, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := cp.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s: no REST mapping: %v", describe(u), err)
			continue
		}
		namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
		if namespaced && u.GetNamespace() == "" {
			t.Errorf("%s is namespaced but names no namespace", describe(u))
		}
		if !namespaced && u.GetNamespace() != "" {
			t.Errorf("%s is cluster-scoped but names namespace %q", describe(u), u.GetNamespace())
		}
	}
}

// createNamespace creates a namespace with a fixed name, unless it exists.
func createNamespace(t *testing.T, cp *testenv.ControlPlane, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := cp.Client.Create(t.Context(), ns)
	if apierrors.IsAlreadyExists(err) {
		return
	}
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// restricted labels a namespace so that Pod Security admission enforces "restricted".
var restricted = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
}

// podTemplates returns the pods that the workloads among objs would create, as the
// Deployment and StatefulSet controllers would build them (no controller runs here).
func podTemplates(t *testing.T, objs []*unstructured.Unstructured) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			d := convert[appsv1.Deployment](t, u)
			pods = append(pods, podFrom(d.Namespace, d.Name+"-0", d.Spec.Template))
		case "StatefulSet":
			s := convert[appsv1.StatefulSet](t, u)
			pod := podFrom(s.Namespace, s.Name+"-0", s.Spec.Template)
			// The StatefulSet controller adds a volume per claim template.
			for _, c := range s.Spec.VolumeClaimTemplates {
				pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
					Name: c.Name,
					VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
						ClaimName: c.Name + "-" + s.Name + "-0",
					}},
				})
			}
			pods = append(pods, pod)
		case "DaemonSet", "Job", "CronJob", "ReplicaSet", "Pod":
			t.Errorf("%s: the tests build no pod for this kind yet; teach podTemplates about it", describe(u))
		}
	}
	return pods
}

func podFrom(namespace, name string, tmpl corev1.PodTemplateSpec) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   namespace,
			Labels:      tmpl.Labels,
			Annotations: tmpl.Annotations,
		},
		Spec: tmpl.Spec,
	}
}

// requirePodsAdmitted creates each pod with a server-side dry run: the API server validates it
// and Pod Security admission checks it against the namespace's "restricted" level, without a
// scheduler or kubelet ever seeing it.
func requirePodsAdmitted(t *testing.T, cp *testenv.ControlPlane, pods []*corev1.Pod) {
	t.Helper()
	for _, pod := range pods {
		if err := cp.Client.Create(t.Context(), pod.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("pod of %s/%s not admitted: %v", pod.Namespace, pod.Name, err)
		}
	}
}

// generatedRules reads the rules controller-gen generated: those of the ClusterRole, and
// those of namespaced Roles (RBAC markers with namespace=), which may be none.
func (tl tools) generatedRules(t *testing.T, rel string) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	for _, u := range tl.readObjects(t, rel) {
		switch u.GetKind() {
		case "ClusterRole":
			cluster = append(cluster, convert[rbacv1.ClusterRole](t, u).Rules...)
		case "Role":
			namespaced = append(namespaced, convert[rbacv1.Role](t, u).Rules...)
		default:
			t.Fatalf("%s: unexpected %s", rel, describe(u))
		}
	}
	if len(cluster) == 0 {
		t.Fatalf("%s holds no ClusterRole rules", rel)
	}
	return cluster, namespaced
}

// clusterRoleRules reads the rules of the one ClusterRole in a file of RBAC objects.
func (tl tools) clusterRoleRules(t *testing.T, rel string) []rbacv1.PolicyRule {
	t.Helper()
	roles := byKind(tl.readObjects(t, rel), "ClusterRole")
	if len(roles) != 1 {
		t.Fatalf("%s holds %d ClusterRoles, want one", rel, len(roles))
	}
	return convert[rbacv1.ClusterRole](t, roles[0]).Rules
}

// roleRules reads the rules of the Role named name in a file of RBAC objects.
func (tl tools) roleRules(t *testing.T, rel, name string) []rbacv1.PolicyRule {
	t.Helper()
	for _, u := range tl.readObjects(t, rel) {
		if u.GetKind() == "Role" && u.GetName() == name {
			return convert[rbacv1.Role](t, u).Rules
		}
	}
	t.Fatalf("%s holds no Role %s", rel, name)
	return nil
}
