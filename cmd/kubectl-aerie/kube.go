package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	aeriev1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// kubeFlags select the cluster and namespace of the commands that talk to
// Kubernetes, as kubectl's flags of the same names do.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

func (k *kubeFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "the kubeconfig `file` (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&k.context, "context", "", "the kubeconfig `context` to use")
	fs.StringVarP(&k.namespace, "namespace", "n", "", "the `namespace` (default: the context's)")
}

// kubeClient reads and writes AgentSessions and reads runner pod logs. It is
// built on client-go's REST client alone, without the typed clientsets,
// which would register every Kubernetes API type at each start.
type kubeClient struct {
	sessions  rest.Interface
	core      rest.Interface
	namespace string
}

// sessionScheme is built on first use, not at every start of aerie.
var sessionScheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := aeriev1.AddToScheme(s); err != nil {
		panic(err) // a programming error: the scheme is static
	}
	return s
})

// userAgent is how kubectl-aerie's requests name their client to the API
// server.
const userAgent = "aerie"

func (k kubeFlags) client() (*kubeClient, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: k.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns := k.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("kubeconfig: namespace: %w", err)
		}
	}
	codecs := serializer.NewCodecFactory(sessionScheme())

	sc := rest.CopyConfig(cfg)
	sc.GroupVersion = &aeriev1.GroupVersion
	sc.APIPath = "/apis"
	sc.NegotiatedSerializer = codecs.WithoutConversion()
	sc.UserAgent = userAgent
	sessions, err := rest.RESTClientFor(sc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	cc2 := rest.CopyConfig(cfg)
	cc2.GroupVersion = &schema.GroupVersion{Version: "v1"}
	cc2.APIPath = "/api"
	cc2.NegotiatedSerializer = codecs.WithoutConversion()
	cc2.UserAgent = userAgent
	core, err := rest.RESTClientFor(cc2)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &kubeClient{sessions: sessions, core: core, namespace: ns}, nil
}

func (c *kubeClient) create(ctx context.Context, s *aeriev1.AgentSession) (*aeriev1.AgentSession, error) {
	out := &aeriev1.AgentSession{}
	err := c.sessions.Post().Namespace(c.namespace).Resource("agentsessions").Body(s).Do(ctx).Into(out)
	return out, err
}

func (c *kubeClient) get(ctx context.Context, name string) (*aeriev1.AgentSession, error) {
	out := &aeriev1.AgentSession{}
	err := c.sessions.Get().Namespace(c.namespace).Resource("agentsessions").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *kubeClient) list(ctx context.Context) (*aeriev1.AgentSessionList, error) {
	out := &aeriev1.AgentSessionList{}
	err := c.sessions.Get().Namespace(c.namespace).Resource("agentsessions").Do(ctx).Into(out)
	return out, err
}

// cancel sets spec.cancel, the one field of a session's spec that may change.
func (c *kubeClient) cancel(ctx context.Context, name string) (*aeriev1.AgentSession, error) {
	out := &aeriev1.AgentSession{}
	err := c.sessions.Patch(types.MergePatchType).Namespace(c.namespace).Resource("agentsessions").Name(name).
		Body([]byte(`{"spec":{"cancel":true}}`)).Do(ctx).Into(out)
	return out, err
}

// addApproval appends a decision to spec.approvals, the list of a session's
// spec that may grow; the update fails on a conflict rather than lose a
// decision someone else added.
func (c *kubeClient) addApproval(
	ctx context.Context, s *aeriev1.AgentSession, d aeriev1.ApprovalDecision,
) (*aeriev1.AgentSession, error) {
	s = s.DeepCopy()
	s.Spec.Approvals = append(s.Spec.Approvals, d)
	out := &aeriev1.AgentSession{}
	err := c.sessions.Put().Namespace(c.namespace).Resource("agentsessions").Name(s.Name).Body(s).Do(ctx).Into(out)
	return out, err
}

// logs streams the agent container's log of a runner pod: the session's
// JSON Lines events.
func (c *kubeClient) logs(ctx context.Context, pod string, follow bool) (io.ReadCloser, error) {
	req := c.core.Get().Namespace(c.namespace).Resource("pods").Name(pod).SubResource("log").Param("container", "agent")
	if follow {
		req = req.Param("follow", "true")
	}
	return req.Stream(ctx)
}

// finished reports whether the session has ended, successfully or not.
func finished(s *aeriev1.AgentSession) bool {
	switch s.Status.Phase {
	case aeriev1.PhaseSucceeded, aeriev1.PhaseFailed, aeriev1.PhaseCancelled:
		return true
	}
	return false
}

// settled reports whether the session goes on no further by itself: it
// has finished, or it awaits a person's approval (which aerie run exits 5
// for, so that a pipeline never hangs on it).
func settled(s *aeriev1.AgentSession) bool {
	return finished(s) || s.Status.Phase == aeriev1.PhaseAwaitingApproval
}

// exitStatus is the exit status that stands for a settled session, as aerie
// run would exit: the runner's own, or one derived from the phase and the
// outcome when the runner never reported one (its pod was lost, say).
func exitStatus(s *aeriev1.AgentSession) int {
	if s.Status.Phase == aeriev1.PhaseAwaitingApproval {
		// Whatever an earlier attempt reported: the session is paused now.
		return runconfig.ExitAwaitingApproval
	}
	if r := s.Status.Result; r != nil && r.ExitCode != nil {
		return int(*r.ExitCode)
	}
	switch s.Status.Phase {
	case aeriev1.PhaseSucceeded:
		return runconfig.ExitCompleted
	case aeriev1.PhaseCancelled:
		return runconfig.ExitTerminated
	}
	if r := s.Status.Result; r != nil {
		switch r.Outcome {
		case aeriev1.OutcomeBudgetExceeded, aeriev1.OutcomeTimedOut:
			return runconfig.ExitBudget
		case aeriev1.OutcomeResultInvalid:
			return runconfig.ExitResultInvalid
		}
	}
	return runconfig.ExitFailure
}

// pollInterval is how often waiting commands read the session's status.
const pollInterval = 500 * time.Millisecond

// wait polls the session until done says it is, calling seen on every
// change of phase, or until ctx ends.
func (c *kubeClient) wait(
	ctx context.Context, name string, done func(*aeriev1.AgentSession) bool, seen func(*aeriev1.AgentSession),
) (*aeriev1.AgentSession, error) {
	var last aeriev1.AgentSessionPhase = "-"
	for {
		s, err := c.get(ctx, name)
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("session %s/%s was deleted before it finished", c.namespace, name)
		case err != nil && ctx.Err() == nil:
			// A passing API server hiccup must not fail a CI job that
			// waits an hour: keep polling until the deadline.
		case err != nil:
			return nil, err
		default:
			if s.Status.Phase != last {
				last = s.Status.Phase
				seen(s)
			}
			if done(s) {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(pollInterval):
		}
	}
}

var errWaitTimeout = errors.New("timed out waiting for the session to finish")

// isInvalid reports an API server's refusal of what was sent: validation
// (CEL rules, schema) or a malformed request.
func isInvalid(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}
