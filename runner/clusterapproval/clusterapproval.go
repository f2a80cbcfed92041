// Package clusterapproval decides the tool call an AgentSession paused on,
// in the cluster: it asks the API server whether a user may patch the
// AgentSession (a SubjectAccessReview), and appends the decision to the
// session's spec.approvals with a JSON patch that first tests the
// resourceVersion it read, so that a decision someone else added meanwhile
// is never lost. The web console decides a cluster session's calls through
// it. It speaks the API's JSON over net/http with the few fields it needs,
// so that aerie, which links no Kubernetes client, stays as light to start.
package clusterapproval

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Errors Decide returns, for its caller to tell the reader.
var (
	// ErrNotPending: the call named is not the one the session is paused
	// on (it was decided, timed out, or the session went on).
	ErrNotPending = errors.New("the call does not await approval")
	// ErrDecided: spec.approvals already holds a decision on the call.
	ErrDecided = errors.New("the call is already decided")
	// ErrOtherSession: the AgentSession of that name is not the stored
	// session (its uid differs): it was deleted and created again.
	ErrOtherSession = errors.New("the AgentSession is another session now")
	// ErrNotFound: there is no AgentSession of that name.
	ErrNotFound = errors.New("no such AgentSession")
)

// attempts is how many times Decide reads the session again when the
// patch's precondition failed because the session changed meanwhile.
const attempts = 5

// Client reaches the API server as the console's own identity.
type Client struct {
	// Server is the API server's base URL (https://host:port, or a
	// kubectl proxy's http://127.0.0.1:8001).
	Server string
	// HTTP sends the requests, authenticating them (a bearer token, a
	// client certificate, or none behind kubectl proxy).
	HTTP *http.Client
}

// serviceAccountDir is where a pod's service account credentials are
// mounted.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// InCluster returns a client that authenticates as the pod's service
// account, whose token it reads again at every request (the kubelet
// rotates it).
func InCluster() (*Client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset")
	}
	ca, err := os.ReadFile(filepath.Join(serviceAccountDir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("read the service account's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("read the service account's CA: %s holds no certificate",
			filepath.Join(serviceAccountDir, "ca.crt"))
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &Client{
		Server: "https://" + net.JoinHostPort(host, port),
		HTTP: &http.Client{Timeout: 30 * time.Second, Transport: tokenTransport{
			file: filepath.Join(serviceAccountDir, "token"), next: tr}},
	}, nil
}

// tokenTransport sends the token file's bearer token with each request.
type tokenTransport struct {
	file string
	next http.RoundTripper
}

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := os.ReadFile(t.file)
	if err != nil {
		return nil, fmt.Errorf("read the service account's token: %w", err)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	return t.next.RoundTrip(r)
}

// User is who decides, as the authenticating proxy in front named them.
type User struct {
	Name   string
	Groups []string
}

// Decision is one entry of spec.approvals.
type Decision struct {
	CallID string `json:"callID"`
	// Decision is "Allow" or "Deny".
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// The decisions.
const (
	Allow = "Allow"
	Deny  = "Deny"
)

// agentSession holds the fields of an AgentSession that deciding reads.
type agentSession struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		UID             string `json:"uid"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Approvals []Decision `json:"approvals"`
	} `json:"spec"`
	Status struct {
		Phase           string `json:"phase"`
		PendingApproval *struct {
			CallID string `json:"callID"`
		} `json:"pendingApproval"`
	} `json:"status"`
}

// Allowed asks the API server whether u may patch the AgentSession name in
// namespace; reason is the authorizer's, when it gives one.
func (c *Client) Allowed(ctx context.Context, u User, namespace, name string) (ok bool, reason string, err error) {
	type attrs struct {
		Namespace string `json:"namespace"`
		Verb      string `json:"verb"`
		Group     string `json:"group"`
		Resource  string `json:"resource"`
		Name      string `json:"name"`
	}
	sar := map[string]any{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": map[string]any{"user": u.Name, "groups": u.Groups, "resourceAttributes": attrs{
			Namespace: namespace, Verb: "patch", Group: "aerie.run", Resource: "agentsessions", Name: name}},
	}
	body, err := json.Marshal(sar)
	if err != nil {
		return false, "", fmt.Errorf("encode the access review: %w", err)
	}
	var out struct {
		Status struct {
			Allowed bool   `json:"allowed"`
			Reason  string `json:"reason"`
		} `json:"status"`
	}
	err = c.do(ctx, http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", "application/json", body, &out)
	if err != nil {
		return false, "", fmt.Errorf("review the access of %s: %w", u.Name, err)
	}
	return out.Status.Allowed, out.Status.Reason, nil
}

// Decide appends d to the spec.approvals of the AgentSession name in
// namespace, whose uid must be uid (unless empty), when d.CallID is the
// call it is paused on (status.pendingApproval) and undecided.
func (c *Client) Decide(ctx context.Context, namespace, name, uid string, d Decision) error {
	var last string // the resourceVersion of a refused patch
	var lastErr error
	for range attempts {
		var s agentSession
		if err := c.do(ctx, http.MethodGet, sessionPath(namespace, name), "", nil, &s); err != nil {
			return fmt.Errorf("get agentsession %s/%s: %w", namespace, name, err)
		}
		if lastErr != nil && s.Metadata.ResourceVersion == last {
			// Unchanged, yet refused: the decision itself is invalid.
			return fmt.Errorf("patch agentsession %s/%s: %w", namespace, name, lastErr)
		}
		if err := check(&s, uid, d.CallID); err != nil {
			return err
		}
		err := c.appendDecision(ctx, &s, d)
		if !refused(err) {
			return err
		}
		last, lastErr = s.Metadata.ResourceVersion, err // read it again: another decision may have come
	}
	return fmt.Errorf("decide call %s of agentsession %s/%s: it changed %d times meanwhile; try again",
		d.CallID, namespace, name, attempts)
}

func sessionPath(namespace, name string) string {
	return "/apis/aerie.run/v1alpha1/namespaces/" + url.PathEscape(namespace) + "/agentsessions/" + url.PathEscape(name)
}

// check says whether call of s, as read from the API server, may be
// decided.
func check(s *agentSession, uid, call string) error {
	m := s.Metadata
	switch {
	case uid != "" && m.UID != uid:
		return fmt.Errorf("agentsession %s/%s: %w", m.Namespace, m.Name, ErrOtherSession)
	case slices.ContainsFunc(s.Spec.Approvals, func(a Decision) bool { return a.CallID == call }):
		return fmt.Errorf("agentsession %s/%s: call %s: %w", m.Namespace, m.Name, call, ErrDecided)
	case s.Status.PendingApproval == nil || s.Status.PendingApproval.CallID != call:
		return fmt.Errorf("agentsession %s/%s (phase %s): call %s: %w",
			m.Namespace, m.Name, s.Status.Phase, call, ErrNotPending)
	}
	return nil
}

// op is one operation of a JSON patch (RFC 6902).
type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// appendDecision patches d onto s's spec.approvals, provided s is still
// at the resourceVersion read: the patch tests it first, so a decision
// added meanwhile fails the patch (see refused) instead of being replaced.
func (c *Client) appendDecision(ctx context.Context, s *agentSession, d Decision) error {
	patch := []op{{Op: "test", Path: "/metadata/resourceVersion", Value: s.Metadata.ResourceVersion}}
	if len(s.Spec.Approvals) == 0 {
		patch = append(patch, op{Op: "add", Path: "/spec/approvals", Value: []Decision{d}})
	} else {
		patch = append(patch, op{Op: "add", Path: "/spec/approvals/-", Value: d})
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode the patch: %w", err)
	}
	path := sessionPath(s.Metadata.Namespace, s.Metadata.Name)
	err = c.do(ctx, http.MethodPatch, path, "application/json-patch+json", body, nil)
	if err != nil && !refused(err) {
		return fmt.Errorf("patch agentsession %s/%s: %w", s.Metadata.Namespace, s.Metadata.Name, err)
	}
	return err
}

// StatusError is an API server's refusal.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Code)
}

// refused says whether the API server refused a patch as one that does not
// apply (a failed test operation is a 422, as a failed validation is) or
// conflicts: the session may have changed since it was read.
func refused(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Code == http.StatusConflict || se.Code == http.StatusUnprocessableEntity)
}

// do sends a request of the API and decodes its answer into out (unless
// nil); an answer not 2xx is a *StatusError, a 404 also ErrNotFound.
func (c *Client) do(ctx context.Context, method, path, ctype string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Server, "/")+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("reach the API server: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("read the API server's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var st struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &st) != nil || st.Message == "" {
			st.Message = http.StatusText(resp.StatusCode)
		}
		se := &StatusError{Code: resp.StatusCode, Message: st.Message}
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %w", ErrNotFound, se)
		}
		return se
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode the API server's answer: %w", err)
	}
	return nil
}
