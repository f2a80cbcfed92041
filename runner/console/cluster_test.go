package console_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/clusterapproval"
	"github.com/aerie-run/aerie/runner/console"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/sqlite"
	"github.com/aerie-run/aerie/runner/transcript"
)

// consoleIdentity is the user the console's requests to the API server are
// made as: a service account with only the chart's console.approvals
// rights, not the test's cluster-admin.
const consoleIdentity = "system:serviceaccount:aerie-system:aerie-console"

// clusterClient is a clusterapproval client of cp acting as the console's
// service account, which the API server authorizes by RBAC.
func clusterClient(t *testing.T, cp *testenv.ControlPlane) *clusterapproval.Client {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: consoleIdentity}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &clusterapproval.Client{Server: cfg.Host, HTTP: hc}
}

// grantConsole gives the console's service account what the chart's
// console.approvals gives it: get and patch AgentSessions, create
// SubjectAccessReviews.
func grantConsole(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-aerie-console-approvals"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"aerie.run"}, Resources: []string{"agentsessions"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-aerie-console-approvals"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "aerie-console", Namespace: "aerie-system"}}}
	for _, o := range []client.Object{role, bind} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// allowUser binds a Role that may patch AgentSessions in ns to user.
func allowUser(t *testing.T, ctx context.Context, c client.Client, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "approver", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"aerie.run"}, Resources: []string{"agentsessions"}, Verbs: []string{"get", "patch"}}}}
	bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "approver-" + user, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "approver"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}
	for _, o := range []client.Object{role, bind} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// pausedAgentSession creates an AgentSession paused on call and its
// session in st, stored as a runner pod stores it: under the namespace,
// with the AgentSession's uid as its id and its name as its label.
func pausedAgentSession(t *testing.T, ctx context.Context, c client.Client, st store.Store, ns, name, call string) store.Session {
	t.Helper()
	as := &aeriev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: aeriev1.AgentSessionSpec{Prompt: "push it", HookApproval: aeriev1.HookApprovalAsk,
			Model: aeriev1.ModelSpec{Provider: aeriev1.ProviderScripted, Name: "demo"}}}
	if err := c.Create(ctx, as); err != nil {
		t.Fatal(err)
	}
	as.Status.Phase = aeriev1.PhaseAwaitingApproval
	as.Status.PendingApproval = &aeriev1.PendingApproval{CallID: call, Tool: "bash", Since: metav1.Now()}
	if err := c.Status().Update(ctx, as); err != nil {
		t.Fatal(err)
	}
	in := json.RawMessage(`{"command":"git push"}`)
	var p stream
	p.at = time.Now()
	p.add(transcript.UserMessage{Content: text("push it")})
	p.add(transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockToolUse, ID: call, Name: "bash", Input: in}}})
	p.add(transcript.ToolCall{CallID: call, Name: "bash", Input: in})
	p.add(transcript.ApprovalRequest{CallID: call, Tool: "bash", Preview: "git push"})
	p.add(transcript.Checkpoint{Turn: 1, Outcome: transcript.OutcomeAwaitingApproval})
	sess, err := st.Create(ctx, ns, store.NewSession{ID: uuid.MustParse(string(as.UID)), Kind: store.SessionHeadless,
		Label: name, State: store.StateIdle, Entries: p.entries})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// TestConsoleApproveCluster: with Options.Cluster, a decision on a
// cluster session goes to its AgentSession's spec.approvals, for a user
// the proxy names whom RBAC allows to patch it, and nowhere else.
func TestConsoleApproveCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := testenv.StartControlPlane(t)
	ns := cp.Namespace(t)
	grantConsole(t, ctx, cp.Client)
	allowUser(t, ctx, cp.Client, ns, "alice")
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sess := pausedAgentSession(t, ctx, cp.Client, st, ns, "push", "call-1")
	srv := serve(t, st, console.Options{Tenants: []string{ns}, Cluster: clusterClient(t, cp)})
	page := "/sessions/" + sess.ID.String() + "?ns=" + ns
	token := func(header http.Header) string {
		body := getWith(t, srv, page, header)
		m := csrfField.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("the approval form has no CSRF token for %v:\n%s", header, body)
		}
		return m[1]
	}
	alice := http.Header{"X-Forwarded-User": {"alice"}}
	if body := getWith(t, srv, page, nil); strings.Contains(body, `name="csrf"`) || !strings.Contains(body, "No user is named") {
		t.Errorf("the page offers a decision to no one")
	}
	tok := token(alice)
	for _, tc := range []struct {
		name   string
		header http.Header
		call   string
		want   int
		msg    string
	}{
		{"no user", nil, "call-1", http.StatusForbidden, "No user is named"},
		{"a user without the RoleBinding", http.Header{"X-Forwarded-User": {"bob"}}, "call-1", http.StatusForbidden,
			"bob may not patch agentsessions/push in namespace " + ns},
		{"a group does not help bob", http.Header{"X-Forwarded-User": {"bob"}, "X-Forwarded-Groups": {"devs, ops"}},
			"call-1", http.StatusForbidden, "ask for a RoleBinding"},
		{"no call", alice, "", http.StatusBadRequest, "call: missing"},
		{"a call not pending", alice, "call-0", http.StatusConflict, "Nothing awaits approval"},
		{"approved", alice, "call-1", http.StatusSeeOther, ""},
		{"decided already", alice, "call-1", http.StatusConflict, "already decided"},
	} {
		form := url.Values{"decision": {"approve"}, "csrf": {tok}, "call": {tc.call}, "reason": {"ok to push"}}
		code, body := postForm(t, srv, "/sessions/"+sess.ID.String()+"/approve?ns="+ns, form, tc.header)
		if code != tc.want || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: POST approve: %d, want %d with %q:\n%s", tc.name, code, tc.want, tc.msg, body)
		}
		if tc.want == http.StatusForbidden {
			got := &aeriev1.AgentSession{}
			if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "push"}, got); err != nil {
				t.Fatal(err)
			}
			if len(got.Spec.Approvals) != 0 {
				t.Fatalf("%s: refused, yet spec.approvals is %+v", tc.name, got.Spec.Approvals)
			}
		}
	}
	got := &aeriev1.AgentSession{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "push"}, got); err != nil {
		t.Fatal(err)
	}
	want := []aeriev1.ApprovalDecision{{CallID: "call-1", Decision: aeriev1.DecisionAllow, Reason: "ok to push"}}
	if diff := cmp.Diff(want, got.Spec.Approvals); diff != "" {
		t.Errorf("spec.approvals (-want +got):\n%s", diff)
	}
	entries, err := st.Entries(ctx, ns, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := e.Payload.(transcript.ApprovalDecision); ok {
			t.Errorf("a cluster session's decision was journaled too: %+v", e.Payload)
		}
	}
}

// getWith gets path with header and returns the body, failing on a status
// but 200.
func getWith(t *testing.T, srv *httptest.Server, path string, header http.Header) string {
	t.Helper()
	code, body := send(t, srv, http.MethodGet, path, nil, header)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d:\n%s", path, code, body)
	}
	return body
}

// postForm posts form to path with header, as the session page's form
// does, and returns the status (a redirect not followed) and the body.
func postForm(t *testing.T, srv *httptest.Server, path string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	maps.Copy(h, header)
	return send(t, srv, http.MethodPost, path, strings.NewReader(form.Encode()), h)
}

func send(t *testing.T, srv *httptest.Server, method, path string, body io.Reader, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, header)
	c := *srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
