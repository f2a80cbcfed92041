package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aerie-run/aerie/runner/clusterapproval"
	"github.com/aerie-run/aerie/runner/store"
)

// Cluster decides the calls of sessions that belong to an AgentSession:
// runner/clusterapproval's Client.
type Cluster interface {
	Allowed(ctx context.Context, u clusterapproval.User, namespace, name string) (bool, string, error)
	Decide(ctx context.Context, namespace, name, uid string, d clusterapproval.Decision) error
}

// groups are the groups an authenticating proxy in front names the user
// in, comma-separated in X-Forwarded-Groups (as oauth2-proxy sends them).
func groups(r *http.Request) []string {
	var gs []string
	for _, h := range r.Header.Values("X-Forwarded-Groups") {
		for g := range strings.SplitSeq(h, ",") {
			if g = strings.TrimSpace(g); g != "" {
				gs = append(gs, g)
			}
		}
	}
	return gs
}

// agentSession is the AgentSession sess's tree belongs to: its root,
// stored under the namespace with the AgentSession's uid as its id and its
// name as its label.
func (s *Server) agentSession(ctx context.Context, tenant string, sess store.Session) (string, string, error) {
	root := sess
	if sess.RootID != sess.ID {
		var err error
		if root, err = s.o.Store.Session(ctx, tenant, sess.RootID); err != nil {
			return "", "", fmt.Errorf("read the root of session %s: %w", sess.ID, err)
		}
	}
	if root.Label == "" {
		return "", "", fmt.Errorf("session %s has no label: it names no AgentSession", root.ID)
	}
	return root.Label, root.ID.String(), nil
}

// decideInCluster appends the decision on call to the spec.approvals of
// the AgentSession of sess, when the user the proxy names may patch it.
// It writes the response itself when it fails, and then returns false.
func (s *Server) decideInCluster(
	w http.ResponseWriter, r *http.Request, tenant string, sess store.Session, d clusterapproval.Decision,
) bool {
	u := clusterapproval.User{Name: user(r), Groups: groups(r)}
	if u.Name == "" {
		s.fail(w, r, http.StatusForbidden, "No user is named: a cluster session's calls are decided only for the user "+
			"an authenticating proxy in front of the console names (X-Forwarded-User or X-Forwarded-Email).", nil)
		return false
	}
	ctx := r.Context()
	name, uid, err := s.agentSession(ctx, tenant, sess)
	if err != nil {
		s.fail(w, r, http.StatusConflict, "This session belongs to no AgentSession the console can decide for.", err)
		return false
	}
	ok, reason, err := s.o.Cluster.Allowed(ctx, u, tenant, name)
	switch {
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, "The API server could not say whether you may decide.", err)
		return false
	case !ok:
		msg := fmt.Sprintf("%s may not patch agentsessions/%s in namespace %s, so may not decide its calls: "+
			"ask for a RoleBinding that allows it.", u.Name, name, tenant)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		s.fail(w, r, http.StatusForbidden, msg, nil)
		return false
	}
	err = s.o.Cluster.Decide(ctx, tenant, name, uid, d)
	switch {
	case errors.Is(err, clusterapproval.ErrNotPending), errors.Is(err, clusterapproval.ErrDecided):
		s.fail(w, r, http.StatusConflict, "Nothing awaits approval in this session any more: "+err.Error()+".", nil)
		return false
	case errors.Is(err, clusterapproval.ErrOtherSession), errors.Is(err, clusterapproval.ErrNotFound):
		s.fail(w, r, http.StatusConflict, "The AgentSession "+name+" of this session is gone.", nil)
		return false
	case err != nil:
		s.fail(w, r, http.StatusBadGateway, "The decision was not recorded: the API server refused it.", err)
		return false
	}
	return true
}
