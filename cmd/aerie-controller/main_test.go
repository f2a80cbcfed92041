package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/aerie-run/aerie/hack/testenv"
)

// TestMetricsEndpoint runs the controller as it is deployed, with the flags it is deployed
// with, under a ServiceAccount that has nothing but the ClusterRoles config/rbac ships, and
// scrapes its metrics endpoint: a request without a token is refused, a token the API server
// does not authorize for GET /metrics is forbidden, and a token bound to the metrics-reader
// role gets the metrics, over TLS with the certificate of --metrics-cert-path, and without
// HTTP/2.
func TestMetricsEndpoint(t *testing.T) {
	cp := testenv.StartControlPlane(t)
	ns := cp.Namespace(t)
	controller := serviceAccount(t, cp, ns, "aerie-controller")
	for _, f := range []string{"config/rbac/role.yaml", "config/rbac/metrics_auth_role.yaml"} {
		bind(t, cp, clusterRole(t, cp, f), controller)
	}
	scraper := serviceAccount(t, cp, ns, "prometheus")
	bind(t, cp, clusterRole(t, cp, "config/rbac/metrics_reader_role.yaml"), scraper)
	stranger := serviceAccount(t, cp, ns, "stranger")

	certDir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	fs := flag.NewFlagSet("aerie-controller", flag.ContinueOnError)
	o := bindFlags(fs)
	if err := fs.Parse([]string{"--metrics-bind-address=" + addr, "--metrics-cert-path=" + certDir,
		"--health-probe-bind-address=0", "--namespace=" + ns, "--runner-image=ghcr.io/aerie-run/aerie-runner:test"}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := rest.AnonymousClientConfig(cp.Config)
	kubeconfig.BearerToken = token(t, cp, controller)

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, func() (*rest.Config, error) { return kubeconfig, nil }, *o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the controller did not stop within a minute of its context's end")
		}
	}()

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(certPEM) {
		t.Fatal("the generated certificate does not parse")
	}
	// The client trusts only the certificate of --metrics-cert-path, and would take HTTP/2.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true,
	}}
	scrape := func(bearer string) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, string(body), err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, _, err := scrape("")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics endpoint did not answer within a minute: %v", err)
		}
		select {
		case err := <-done:
			t.Fatalf("the controller stopped: %v", err)
		default:
		}
	}

	for _, tc := range []struct {
		name, token string
		// want is the status; 0 is any refusal.
		want int
	}{
		{"no token", "", http.StatusUnauthorized},
		// The API server reports the token as an error rather than as not authenticated,
		// which controller-runtime's filter answers with a 500.
		{"a token the API server did not issue", "not-a-token", 0},
		{"a ServiceAccount without the metrics-reader role", token(t, cp, stranger), http.StatusForbidden},
	} {
		resp, body, err := scrape(tc.token)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (tc.want != 0 && resp.StatusCode != tc.want) || resp.StatusCode < 400 || strings.Contains(body, "aerie_") {
			t.Errorf("%s: %s, want a refusal (%d) and no metrics:\n%s", tc.name, resp.Status, tc.want, body)
		}
	}
	resp, body, err := scrape(token(t, cp, scraper))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "aerie_tool_calls_total") {
		t.Errorf("the metrics-reader ServiceAccount: %s, want 200 with the aerie metrics:\n%.2000s", resp.Status, body)
	}
	if resp.Proto != "HTTP/1.1" {
		t.Errorf("the metrics endpoint spoke %s; HTTP/2 is off without --enable-http2", resp.Proto)
	}

	// Plain HTTP gets no metrics.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		if err := resp.Body.Close(); err != nil {
			t.Error(err)
		}
		if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "aerie_") {
			t.Errorf("plain HTTP got %s:\n%s", resp.Status, b)
		}
	}
}

func TestMetricsServer(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, args ...string) options {
		t.Helper()
		fs := flag.NewFlagSet("aerie-controller", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := bindFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return *o
	}
	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		m, err := metricsServer(parse(t))
		if err != nil {
			t.Fatal(err)
		}
		if m.BindAddress != ":8443" || !m.SecureServing || m.FilterProvider == nil || m.CertDir != "" {
			t.Errorf("default metrics server: %+v, want HTTPS on :8443 with authentication and authorization, and a self-signed certificate", m)
		}
		c := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
		for _, opt := range m.TLSOpts {
			opt(c)
		}
		if strings.Join(c.NextProtos, ",") != "http/1.1" {
			t.Errorf("ALPN protocols %q: want HTTP/2 off by default", c.NextProtos)
		}
	})
	t.Run("http2", func(t *testing.T) {
		t.Parallel()
		m, err := metricsServer(parse(t, "--enable-http2"))
		if err != nil || len(m.TLSOpts) != 0 {
			t.Errorf("--enable-http2: %d TLS options (err %v), want none", len(m.TLSOpts), err)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		t.Parallel()
		m, err := metricsServer(parse(t, "--metrics-secure=false", "--metrics-bind-address=:8080"))
		if err != nil || m.SecureServing || m.FilterProvider != nil || m.BindAddress != ":8080" {
			t.Errorf("--metrics-secure=false: %+v (err %v), want plain HTTP on :8080 for anyone", m, err)
		}
		if _, err := metricsServer(parse(t, "--metrics-secure=false", "--metrics-cert-path="+t.TempDir())); err == nil {
			t.Error("--metrics-cert-path with --metrics-secure=false was accepted")
		}
	})
	t.Run("certificate", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "serving.pem"), []byte("cert"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The key is missing: controller-runtime would serve a self-signed certificate.
		_, err := metricsServer(parse(t, "--metrics-cert-path="+dir, "--metrics-cert-name=serving.pem", "--metrics-cert-key=serving-key.pem"))
		if err == nil || !strings.Contains(err.Error(), "serving-key.pem") {
			t.Errorf("a certificate without its key: err = %v, want one naming the key's file", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "serving-key.pem"), []byte("key"), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := metricsServer(parse(t, "--metrics-cert-path="+dir, "--metrics-cert-name=serving.pem", "--metrics-cert-key=serving-key.pem"))
		if err != nil || m.CertDir != dir || m.CertName != "serving.pem" || m.KeyName != "serving-key.pem" {
			t.Errorf("--metrics-cert-path: %+v (err %v)", m, err)
		}
	})
}

func serviceAccount(t *testing.T, cp *testenv.ControlPlane, ns, name string) *corev1.ServiceAccount {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := cp.Client.Create(t.Context(), sa); err != nil {
		t.Fatalf("create ServiceAccount %s: %v", name, err)
	}
	return sa
}

// token is a bearer token of sa, issued by the API server.
func token(t *testing.T, cp *testenv.ControlPlane, sa *corev1.ServiceAccount) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	if err := cp.Client.SubResource("token").Create(t.Context(), sa, tr); err != nil {
		t.Fatalf("request a token for %s: %v", sa.Name, err)
	}
	return tr.Status.Token
}

// clusterRole creates the ClusterRole of a repository file.
func clusterRole(t *testing.T, cp *testenv.ControlPlane, rel string) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil || role.Kind != "ClusterRole" {
		t.Fatalf("%s: want one ClusterRole: %v", rel, err)
	}
	if err := cp.Client.Create(t.Context(), &role); err != nil {
		t.Fatalf("create ClusterRole %s of %s: %v", role.Name, rel, err)
	}
	return &role
}

func bind(t *testing.T, cp *testenv.ControlPlane, role *rbacv1.ClusterRole, sa *corev1.ServiceAccount) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + sa.Namespace + "-" + sa.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	if err := cp.Client.Create(t.Context(), b); err != nil {
		t.Fatalf("bind %s to %s: %v", role.Name, sa.Name, err)
	}
}

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
