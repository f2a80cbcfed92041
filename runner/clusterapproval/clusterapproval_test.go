package clusterapproval

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/hack/testenv"
)

// TestDecide runs against a real API server: a decision is appended to
// spec.approvals only while its call is pending and undecided, and a patch
// built on a session read before someone else's decision fails rather
// than lose that decision.
func TestDecide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := testenv.StartControlPlane(t)
	ns := cp.Namespace(t)
	hc, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Server: cp.Config.Host, HTTP: hc}
	as := &aeriev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
		Spec: aeriev1.AgentSessionSpec{Prompt: "go", HookApproval: aeriev1.HookApprovalAsk,
			Model: aeriev1.ModelSpec{Provider: aeriev1.ProviderScripted, Name: "demo"}}}
	if err := cp.Client.Create(ctx, as); err != nil {
		t.Fatal(err)
	}
	as.Status.Phase = aeriev1.PhaseAwaitingApproval
	as.Status.PendingApproval = &aeriev1.PendingApproval{CallID: "c1", Tool: "bash", Since: metav1.Now()}
	if err := cp.Client.Status().Update(ctx, as); err != nil {
		t.Fatal(err)
	}
	uid := string(as.UID)

	// Read before another decision (on a call decided in advance) lands.
	var stale agentSession
	if err := c.do(ctx, http.MethodGet, sessionPath(ns, "s"), "", nil, &stale); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(as), as); err != nil {
		t.Fatal(err)
	}
	as.Spec.Approvals = []aeriev1.ApprovalDecision{{CallID: "c0", Decision: aeriev1.DecisionDeny}}
	if err := cp.Client.Update(ctx, as); err != nil {
		t.Fatal(err)
	}
	if err := c.appendDecision(ctx, &stale, Decision{CallID: "c1", Decision: Allow}); !refused(err) {
		t.Fatalf("a patch on a stale read: %v, want refused", err)
	}
	approvals := func() []aeriev1.ApprovalDecision {
		t.Helper()
		got := &aeriev1.AgentSession{}
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(as), got); err != nil {
			t.Fatal(err)
		}
		return got.Spec.Approvals
	}
	want := []aeriev1.ApprovalDecision{{CallID: "c0", Decision: aeriev1.DecisionDeny}}
	if diff := cmp.Diff(want, approvals()); diff != "" {
		t.Fatalf("after the stale patch (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name, ns, sess, uid string
		d                   Decision
		want                error
		msg                 string
	}{
		{"no such session", ns, "nope", "", Decision{CallID: "c1", Decision: Allow}, ErrNotFound, ""},
		{"another uid", ns, "s", "0000", Decision{CallID: "c1", Decision: Allow}, ErrOtherSession, ""},
		{"a call not pending", ns, "s", uid, Decision{CallID: "c2", Decision: Allow}, ErrNotPending, ""},
		{"a call decided", ns, "s", uid, Decision{CallID: "c0", Decision: Allow}, ErrDecided, ""},
		{"an invalid decision", ns, "s", uid, Decision{CallID: "c1", Decision: Allow, Reason: strings.Repeat("x", 2000)},
			nil, "reason"},
		{"approved", ns, "s", uid, Decision{CallID: "c1", Decision: Allow, Reason: "fine"}, nil, ""},
	} {
		err := c.Decide(ctx, tc.ns, tc.sess, tc.uid, tc.d)
		switch {
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		case tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)):
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.msg)
		case tc.want == nil && tc.msg == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	want = append(want, aeriev1.ApprovalDecision{CallID: "c1", Decision: aeriev1.DecisionAllow, Reason: "fine"})
	if diff := cmp.Diff(want, approvals()); diff != "" {
		t.Errorf("spec.approvals (-want +got):\n%s", diff)
	}
}

// TestAllowed: the access review answers for the user and their groups
// by the RoleBindings of the namespace.
func TestAllowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cp := testenv.StartControlPlane(t)
	ns := cp.Namespace(t)
	hc, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Server: cp.Config.Host, HTTP: hc}
	if _, err := cp.Kubectl(ctx, "-n", ns, "create", "role", "approver", "--verb=patch", "--resource=agentsessions.aerie.run"); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Kubectl(ctx, "-n", ns, "create", "rolebinding", "approver", "--role=approver",
		"--user=alice", "--group=approvers"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		u    User
		want bool
	}{
		{"the user bound", User{Name: "alice"}, true},
		{"a user of the group bound", User{Name: "carol", Groups: []string{"devs", "approvers"}}, true},
		{"a user not bound", User{Name: "bob", Groups: []string{"devs"}}, false},
	} {
		got, _, err := c.Allowed(ctx, tc.u, ns, "s")
		if err != nil || got != tc.want {
			t.Errorf("%s: allowed %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if got, _, err := c.Allowed(ctx, User{Name: "alice"}, "default", "s"); err != nil || got {
		t.Errorf("alice in another namespace: allowed %v, %v; want false", got, err)
	}
}
