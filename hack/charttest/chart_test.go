package charttest

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/provider"
)

// chartValues are the values files the chart must install with: the chart's own ci/ files
// (a development install, a platform team's, the least one), hack/kind.sh's and the one for
// the images make images-local builds.
var chartValues = []string{
	"charts/aerie/ci/dev-values.yaml",
	"charts/aerie/ci/production-values.yaml",
	"charts/aerie/ci/minimal-values.yaml",
	"hack/kind/values.yaml",
	"hack/node/values.yaml",
}

func TestHelmLint(t *testing.T) {
	tl := requireTools(t)
	for _, values := range chartValues {
		t.Run(filepath.Base(values), func(t *testing.T) {
			t.Parallel()
			out, err := tl.run(t.Context(), tl.helm, "lint", "--strict", "--kube-version", testenv.KubernetesVersion,
				tl.path("charts/aerie"), "--values", tl.path(values))
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestValuesSchemaRejects renders the chart with each file of testdata/bad-values: helm must
// refuse it, and its message must name what is wrong (the "# want:" lines of the file).
func TestValuesSchemaRejects(t *testing.T) {
	tl := requireTools(t)
	files, err := filepath.Glob(filepath.Join("testdata", "bad-values", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("want at least 5 bad values files in testdata/bad-values, found %d", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for line := range strings.Lines(string(data)) {
				if want, ok := strings.CutPrefix(strings.TrimSpace(line), "# want:"); ok {
					wants = append(wants, strings.TrimSpace(want))
				}
			}
			if len(wants) == 0 {
				t.Fatalf("%s has no '# want:' line saying what the error must mention", file)
			}
			abs, err := filepath.Abs(file)
			if err != nil {
				t.Fatal(err)
			}
			out, err := tl.run(t.Context(), tl.helm, "template", "aerie", tl.path("charts/aerie"),
				"--kube-version", testenv.KubernetesVersion, "--values", abs)
			var te *toolError
			if !errors.As(err, &te) {
				t.Fatalf("helm template accepted %s (err %v); it rendered:\n%s", file, err, out)
			}
			for _, want := range wants {
				if !strings.Contains(te.stderr, want) {
					t.Errorf("helm's message lacks %q:\n%s", want, te.stderr)
				}
			}
			t.Logf("helm says:\n%s", te.stderr)
		})
	}
}

// TestManifestsOnAPIServer hands everything aerie deploys to a real kube-apiserver.
func TestManifestsOnAPIServer(t *testing.T) {
	tl := requireTools(t)
	cp := testenv.StartControlPlane(t)
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{
		Paths: []string{tl.serviceMonitorCRD}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("install the ServiceMonitor CRD: %v", err)
	}
	// Subtests share the API server and run one after another.
	t.Run("chart", func(t *testing.T) { testChart(t, tl, cp) })
	t.Run("pod-security-control", func(t *testing.T) { testPodSecurityEnforced(t, tl, cp) })
	t.Run("helm-install", func(t *testing.T) { testHelmInstall(t, tl, cp) })
	t.Run("kustomize", func(t *testing.T) { testKustomize(t, tl, cp) })
	t.Run("samples", func(t *testing.T) { testSamples(t, tl, cp) })
	t.Run("kind-sessions", func(t *testing.T) { testKindSessions(t, tl, cp) })
}

// consoleApprovalRules are what console.approvals grants the console: to
// read and patch AgentSessions (spec.approvals) and to ask the API server
// whether the user deciding may.
var consoleApprovalRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"aerie.run"}, Resources: []string{"agentsessions"}, Verbs: []string{"get", "patch"}},
	{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
}

type chartCase struct {
	values  string
	release string
	// kinds is how many objects of each kind the chart renders.
	kinds map[string]int
	// args must be on the controller's command line, noArgs must not; "$NS" is the release
	// namespace and "$APP" the chart's appVersion.
	args, noArgs []string
	// image and pullPolicy are the controller container's, when set.
	image      string
	pullPolicy corev1.PullPolicy
	// consoleArgs are the console container's command line; nil: the pod has no console.
	consoleArgs []string
	// policyNamespaces are where runner NetworkPolicies go ("$NS" for the release namespace).
	policyNamespaces []string
	// readers are the subjects bound to the metrics-reader ClusterRole.
	readers []rbacv1.Subject
}

func testChart(t *testing.T, tl tools, cp *testenv.ControlPlane) {
	appVersion := chartAppVersion(t, tl)
	generatedRules, generatedNSRules := tl.generatedRules(t, "config/rbac/role.yaml")
	leaderRules := tl.roleRules(t, "config/rbac/leader_election_role.yaml", "aerie-leader-election")
	metricsAuthRules := tl.clusterRoleRules(t, "config/rbac/metrics_auth_role.yaml")
	metricsReaderRules := tl.clusterRoleRules(t, "config/rbac/metrics_reader_role.yaml")
	base := map[string]int{"CustomResourceDefinition": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 1}
	if len(generatedNSRules) > 0 {
		// RBAC markers with namespace= grant a Role in the controller's namespace.
		base["Role"], base["RoleBinding"] = 1, 1
	}
	// The secure metrics endpoint's ClusterRoles (auth and reader) and the auth binding.
	secureMetrics := map[string]int{"ClusterRole": 2, "ClusterRoleBinding": 1}
	// console.approvals: the console's grant to review access and patch AgentSessions.
	consoleApprovals := map[string]int{"ClusterRole": 1, "ClusterRoleBinding": 1}
	with := func(extras ...map[string]int) map[string]int {
		m := maps.Clone(base)
		for _, extra := range extras {
			for kind, n := range extra {
				m[kind] += n
			}
		}
		return m
	}
	cases := []chartCase{{
		values:  chartValues[0],
		release: "aerie-dev",
		kinds: with(secureMetrics, map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Service": 2,
			"Secret": 1, "StatefulSet": 1}),
		args: []string{"--leader-elect", "--metrics-bind-address=:8443", "--metrics-secure=true", "--health-probe-bind-address=:8081",
			"--namespace=$NS", "--runner-image=ghcr.io/aerie-run/aerie-runner:$APP",
			"--database-secret=aerie-dev-postgresql", "--log-level=INFO"},
		consoleArgs: []string{"--addr=127.0.0.1:8377", "--namespace=$NS", "--read-only"},
	}, {
		values:  chartValues[1],
		release: "aerie-prod",
		kinds: with(secureMetrics, map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Service": 1,
			"ServiceMonitor": 1, "ConfigMap": 2, "NetworkPolicy": 4, "ClusterRoleBinding": 1},
			consoleApprovals),
		args: []string{"--leader-elect", "--namespace=$NS", "--database-secret=aerie-database", "--log-level=WARN",
			"--runner-image=ghcr.io/aerie-run/aerie-runner@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			"--leader-election-namespace=aerie-system", "--metrics-secure=true", "--metrics-cert-path=/etc/aerie/metrics-certs"},
		policyNamespaces: []string{"team-a", "team-b"},
		consoleArgs:      []string{"--addr=127.0.0.1:8377", "--namespace=team-a", "--namespace=team-b", "--cluster"},
		readers: []rbacv1.Subject{
			{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"},
			{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "platform-oncall"},
		},
	}, {
		values:           chartValues[2],
		release:          "aerie-min",
		kinds:            with(map[string]int{"NetworkPolicy": 2}),
		args:             []string{"--metrics-bind-address=0", "--database-secret=aerie-database"},
		noArgs:           []string{"--leader-elect", "--metrics-secure=true"},
		policyNamespaces: []string{"$NS"},
	}, {
		values:  chartValues[3],
		release: "aerie-kind",
		kinds: with(secureMetrics, map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Service": 2,
			"Secret": 1, "StatefulSet": 1, "NetworkPolicy": 2}),
		args: []string{"--runner-image=ghcr.io/aerie-run/aerie-runner:dev", "--database-secret=aerie-kind-postgresql",
			"--leader-elect"},
		policyNamespaces: []string{"aerie-demo"},
	}, {
		values:  chartValues[4],
		release: "aerie-local",
		kinds:   with(secureMetrics, map[string]int{"ServiceAccount": 1, "Role": 1, "RoleBinding": 1, "Service": 1}),
		args: []string{"--runner-image=localhost/aerie/aerie-runner:dev", "--runner-image-pull-policy=Never",
			"--database-secret=aerie-database"},
		image:      "localhost/aerie/aerie-controller:dev",
		pullPolicy: corev1.PullNever,
	}}

	for _, tc := range cases {
		t.Run(tc.release, func(t *testing.T) {
			ns := cp.Namespace(t)
			labelNamespace(t, cp, ns, restricted)
			subst := strings.NewReplacer("$NS", ns, "$APP", appVersion)
			var wantPolicyNS []string
			for _, pns := range tc.policyNamespaces {
				pns = subst.Replace(pns)
				// The runners' egress and the executors' ingress.
				wantPolicyNS = append(wantPolicyNS, pns, pns)
				createNamespace(t, cp, pns)
			}

			out, err := tl.helmTemplate(t.Context(), tc.release, ns, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			objs := decode(t, "helm template output", []byte(out))
			if diff := cmp.Diff(tc.kinds, kinds(objs)); diff != "" {
				t.Errorf("rendered kinds (-want +got):\n%s", diff)
			}
			requireNamespaces(t, cp, objs)
			apply(t, cp, objs)
			requirePodsAdmitted(t, cp, podTemplates(t, objs))

			// RBAC: exactly what the controller's markers generate, and the same leader-election
			// and metrics grants as config/.
			for _, u := range byKind(objs, "ClusterRole") {
				rules := convert[rbacv1.ClusterRole](t, u).Rules
				switch u.GetName() {
				case tc.release + "-controller":
					if diff := cmp.Diff(generatedRules, rules); diff != "" {
						t.Errorf("ClusterRole %s drifted from config/rbac/role.yaml (run `make manifests`) (-generated +chart):\n%s", u.GetName(), diff)
					}
				case tc.release + "-metrics-auth":
					if diff := cmp.Diff(metricsAuthRules, rules); diff != "" {
						t.Errorf("ClusterRole %s differs from config/rbac/metrics_auth_role.yaml (-config +chart):\n%s", u.GetName(), diff)
					}
				case tc.release + "-controller-console-approvals":
					if diff := cmp.Diff(consoleApprovalRules, rules); diff != "" {
						t.Errorf("ClusterRole %s grants (-want +chart):\n%s", u.GetName(), diff)
					}
				case tc.release + "-metrics-reader":
					if diff := cmp.Diff(metricsReaderRules, rules); diff != "" {
						t.Errorf("ClusterRole %s differs from config/rbac/metrics_reader_role.yaml (-config +chart):\n%s", u.GetName(), diff)
					}
				default:
					t.Errorf("unexpected %s", describe(u))
				}
			}
			var readers []rbacv1.Subject
			for _, u := range byKind(objs, "ClusterRoleBinding") {
				if b := convert[rbacv1.ClusterRoleBinding](t, u); b.RoleRef.Name == tc.release+"-metrics-reader" {
					readers = b.Subjects
				}
			}
			if diff := cmp.Diff(tc.readers, readers); diff != "" {
				t.Errorf("metrics readers (-want +got):\n%s", diff)
			}
			for _, u := range byKind(objs, "ServiceMonitor") {
				endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
				for _, e := range endpoints {
					e, _ := e.(map[string]any)
					if e["scheme"] != "https" || e["bearerTokenFile"] == nil {
						t.Errorf("%s scrapes %v without a bearer token, want HTTPS with Prometheus's token", describe(u), e["scheme"])
					}
				}
			}
			for _, u := range byKind(objs, "Role") {
				rules := convert[rbacv1.Role](t, u).Rules
				switch u.GetName() {
				case tc.release + "-leader-election":
					if diff := cmp.Diff(leaderRules, rules); diff != "" {
						t.Errorf("Role %s differs from config/rbac/leader_election_role.yaml (-config +chart):\n%s", u.GetName(), diff)
					}
				case tc.release + "-controller":
					if diff := cmp.Diff(generatedNSRules, rules); diff != "" {
						t.Errorf("Role %s drifted from the Roles of config/rbac/role.yaml (run `make manifests`) (-generated +chart):\n%s", u.GetName(), diff)
					}
				default:
					t.Errorf("unexpected %s", describe(u))
				}
			}

			deploy := convert[appsv1.Deployment](t, byKind(objs, "Deployment")[0])
			args := deploy.Spec.Template.Spec.Containers[0].Args
			for _, want := range tc.args {
				if want = subst.Replace(want); !slices.Contains(args, want) {
					t.Errorf("controller args lack %s: %q", want, args)
				}
			}
			for _, bad := range tc.noArgs {
				if slices.Contains(args, bad) {
					t.Errorf("controller args hold %s: %q", bad, args)
				}
			}
			if c := deploy.Spec.Template.Spec.Containers[0]; tc.image != "" && (c.Image != tc.image || c.ImagePullPolicy != tc.pullPolicy) {
				t.Errorf("controller image %s (pull policy %s), want %s (%s)", c.Image, c.ImagePullPolicy, tc.image, tc.pullPolicy)
			}
			var consoleArgs []string
			for _, c := range deploy.Spec.Template.Spec.Containers {
				if c.Name == "console" {
					consoleArgs = c.Args
				}
			}
			var wantConsole []string
			for _, a := range tc.consoleArgs {
				wantConsole = append(wantConsole, subst.Replace(a))
			}
			if diff := cmp.Diff(wantConsole, consoleArgs); diff != "" {
				t.Errorf("console container args (-want +got):\n%s", diff)
			}
			requireBindings(t, objs, deploy)
			requireServicesSelectPods(t, objs)

			var gotPolicyNS []string
			for _, u := range byKind(objs, "NetworkPolicy") {
				gotPolicyNS = append(gotPolicyNS, u.GetNamespace())
			}
			if diff := cmp.Diff(wantPolicyNS, gotPolicyNS); diff != "" {
				t.Errorf("NetworkPolicy namespaces (-want +got):\n%s", diff)
			}
			for _, u := range byKind(objs, "ConfigMap") {
				if got := u.GetLabels()["aerie.run/layer"]; got != u.GetName() {
					t.Errorf("platform layer %s: label aerie.run/layer = %q, want %q", describe(u), got, u.GetName())
				}
			}
		})
	}
}

// testPodSecurityEnforced is the control for requirePodsAdmitted: the same controller pod,
// made to break "restricted", must be refused. Otherwise admission would not be checking.
func testPodSecurityEnforced(t *testing.T, tl tools, cp *testenv.ControlPlane) {
	ns := cp.Namespace(t)
	labelNamespace(t, cp, ns, restricted)
	out, err := tl.helmTemplate(t.Context(), "aerie-psa", ns, chartValues[0])
	if err != nil {
		t.Fatal(err)
	}
	pods := podTemplates(t, byKind(decode(t, "helm template output", []byte(out)), "Deployment"))
	if len(pods) != 1 {
		t.Fatalf("want the controller's pod, got %d pods", len(pods))
	}
	requirePodsAdmitted(t, cp, pods)
	pod := pods[0]
	pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
	err = cp.Client.Create(t.Context(), pod, client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
		t.Fatalf("a pod allowing privilege escalation in a restricted namespace: err = %v, want a PodSecurity refusal", err)
	}
}

// testHelmInstall installs, upgrades and uninstalls a release with helm itself, and checks
// that bad values stop `helm install` before anything reaches the cluster.
func testHelmInstall(t *testing.T, tl tools, cp *testenv.ControlPlane) {
	ctx := t.Context()
	ns := cp.Namespace(t)
	labelNamespace(t, cp, ns, restricted)
	helm := func(args ...string) (string, error) {
		return tl.run(ctx, tl.helm, append(args, "--kubeconfig", cp.Kubeconfig, "--namespace", ns)...)
	}
	const release = "aerie-inst"
	install := []string{release, tl.path("charts/aerie"), "--values", tl.path(chartValues[0])}
	out, err := helm(append([]string{"install"}, install...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"is installed in namespace " + ns, "Secret\n" + release + "-postgresql holds its DATABASE_URL"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm install's notes lack %q:\n%s", want, out)
		}
	}
	password := func() (string, string) {
		var s corev1.Secret
		if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-postgresql"}, &s); err != nil {
			t.Fatalf("get the development database Secret: %v", err)
		}
		return string(s.Data["password"]), string(s.Data["DATABASE_URL"])
	}
	pw, url := password()
	if len(pw) < 32 || !strings.Contains(url, ":"+pw+"@"+release+"-postgresql."+ns+".svc:5432/") {
		t.Fatalf("generated password %q / DATABASE_URL %q: want a 32-character password inside the URL", pw, url)
	}
	// An upgrade must keep the generated password: the database already uses it.
	if out, err := helm(append([]string{"upgrade"}, install...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if pw2, url2 := password(); pw2 != pw || url2 != url {
		t.Errorf("helm upgrade changed the database password: %q → %q", pw, pw2)
	}

	// Bad values: install fails with the schema's message and leaves no release behind.
	_, err = helm("install", "aerie-bad", tl.path("charts/aerie"), "--values", tl.path("hack/charttest/testdata/bad-values/pull-policy.yaml"))
	var te *toolError
	if !errors.As(err, &te) || !strings.Contains(te.stderr, "/controller/image/pullPolicy") {
		t.Errorf("helm install with a bad pullPolicy: err = %v, want the schema's refusal", err)
	}
	if _, err := helm("status", "aerie-bad"); err == nil {
		t.Error("helm install with bad values left a release behind")
	}

	if out, err := helm("uninstall", release, "--wait"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var d appsv1.Deployment
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-controller"}, &d); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, get the controller Deployment: err = %v, want NotFound", err)
	}
}

// testKustomize applies `kustomize build config/default`, the manifests of `make deploy`.
func testKustomize(t *testing.T, tl tools, cp *testenv.ControlPlane) {
	out, err := tl.run(t.Context(), tl.kustomize, "build", tl.path("config/default"))
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, "kustomize build config/default", []byte(out))
	want := map[string]int{"Namespace": 1, "CustomResourceDefinition": 1, "ServiceAccount": 1, "Role": 1,
		"RoleBinding": 1, "ClusterRole": 3, "ClusterRoleBinding": 2, "Deployment": 1, "Service": 1}
	if _, nsRules := tl.generatedRules(t, "config/rbac/role.yaml"); len(nsRules) > 0 {
		want["Role"]++ // the generated namespaced Role, beside the leader-election one
	}
	if diff := cmp.Diff(want, kinds(objs)); diff != "" {
		t.Errorf("kustomize build config/default kinds (-want +got):\n%s", diff)
	}
	requireNamespaces(t, cp, objs)
	apply(t, cp, objs)
	// The Namespace in config/manager enforces "restricted" itself.
	requirePodsAdmitted(t, cp, podTemplates(t, objs))
	deploy := convert[appsv1.Deployment](t, byKind(objs, "Deployment")[0])
	requireBindings(t, objs, deploy)
	requireServicesSelectPods(t, objs)
	if args := deploy.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--metrics-bind-address=:8443") || slices.Contains(args, "--metrics-secure=false") {
		t.Errorf("controller args %q: want the secure metrics endpoint on :8443", args)
	}
}

// testSamples applies config/samples: every sample must pass the CRD's schema and CEL rules.
func testSamples(t *testing.T, tl tools, cp *testenv.ControlPlane) {
	out, err := tl.run(t.Context(), tl.kustomize, "build", tl.path("config/samples"))
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, "kustomize build config/samples", []byte(out))
	if len(objs) == 0 {
		t.Fatal("config/samples holds no objects")
	}
	ns := cp.Namespace(t)
	for _, u := range objs {
		u.SetNamespace(ns)
	}
	apply(t, cp, objs)
}

// testKindSessions applies hack/kind.sh's sample sessions and parses its model script, so the
// round trip it makes on a real cluster starts from objects the API accepts.
func testKindSessions(t *testing.T, tl tools, cp *testenv.ControlPlane) {
	files, err := filepath.Glob(tl.path("hack/kind/session-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no hack/kind/session-*.yaml (err %v)", err)
	}
	for _, f := range files {
		objs := decode(t, f, mustRead(t, f))
		if len(objs) != 1 || objs[0].GetKind() != "AgentSession" {
			t.Errorf("%s: want one AgentSession, got %v", f, kinds(objs))
			continue
		}
		u := objs[0]
		u.SetNamespace(cp.Namespace(t))
		apply(t, cp, objs)

		// The scripted session's model names a script its image layer carries.
		if p, _, _ := unstructured.NestedString(u.Object, "spec", "model", "provider"); p == "scripted" {
			name, _, _ := unstructured.NestedString(u.Object, "spec", "model", "name")
			script := tl.path("hack/kind/layer/scripted/" + name + ".yaml")
			turns, err := provider.ParseScript(script, mustRead(t, script))
			if err != nil {
				t.Errorf("%s: %v", f, err)
			} else if len(turns) == 0 {
				t.Errorf("%s: the script is empty", script)
			}
		}
	}
}

// requireBindings checks that the controller runs as the ServiceAccount its bindings name. The
// binding of the metrics-reader ClusterRole is the scrapers', not the controller's.
func requireBindings(t *testing.T, objs []*unstructured.Unstructured, deploy *appsv1.Deployment) {
	t.Helper()
	sa := deploy.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		t.Fatalf("Deployment %s names no ServiceAccount", deploy.Name)
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, u := range byKind(objs, kind) {
			var subjects []rbacv1.Subject
			if kind == "ClusterRoleBinding" {
				b := convert[rbacv1.ClusterRoleBinding](t, u)
				if strings.HasSuffix(b.RoleRef.Name, "-metrics-reader") {
					continue
				}
				subjects = b.Subjects
			} else {
				subjects = convert[rbacv1.RoleBinding](t, u).Subjects
			}
			want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: deploy.Namespace}}
			if diff := cmp.Diff(want, subjects); diff != "" {
				t.Errorf("%s binds another subject than the controller's ServiceAccount (-want +got):\n%s", describe(u), diff)
			}
		}
	}
	for _, u := range byKind(objs, "ServiceAccount") {
		if u.GetName() != sa || u.GetNamespace() != deploy.Namespace {
			t.Errorf("%s is not the controller's ServiceAccount %s/%s", describe(u), deploy.Namespace, sa)
		}
	}
}

// requireServicesSelectPods checks that each Service selects a pod the objects create and that
// its named target ports exist on that pod.
func requireServicesSelectPods(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	pods := podTemplates(t, objs)
	for _, u := range byKind(objs, "Service") {
		svc := convert[corev1.Service](t, u)
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		var pod *corev1.Pod
		for _, p := range pods {
			if p.Namespace == svc.Namespace && sel.Matches(labels.Set(p.Labels)) {
				pod = p
			}
		}
		if pod == nil {
			t.Errorf("Service %s selects no pod of the chart", svc.Name)
			continue
		}
		for _, port := range svc.Spec.Ports {
			if port.TargetPort.StrVal == "" {
				continue
			}
			found := false
			for _, c := range pod.Spec.Containers {
				for _, cport := range c.Ports {
					found = found || cport.Name == port.TargetPort.StrVal
				}
			}
			if !found {
				t.Errorf("Service %s targets port %q, which pod %s lacks", svc.Name, port.TargetPort.StrVal, pod.Name)
			}
		}
	}
}

func labelNamespace(t *testing.T, cp *testenv.ControlPlane, name string, lbls map[string]string) {
	t.Helper()
	var ns corev1.Namespace
	if err := cp.Client.Get(t.Context(), client.ObjectKey{Name: name}, &ns); err != nil {
		t.Fatalf("get namespace %s: %v", name, err)
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	maps.Copy(ns.Labels, lbls)
	if err := cp.Client.Patch(t.Context(), &ns, patch); err != nil {
		t.Fatalf("label namespace %s: %v", name, err)
	}
}

func chartAppVersion(t *testing.T, tl tools) string {
	t.Helper()
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(mustRead(t, tl.path("charts/aerie/Chart.yaml")), &chart); err != nil || chart.AppVersion == "" {
		t.Fatalf("read appVersion from charts/aerie/Chart.yaml: %v", err)
	}
	return chart.AppVersion
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
