package console

import (
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// treeData is the data of the tree page.
type treeData struct {
	Title    string
	Tenant   string
	Tenants  []string
	NS       string
	Roots    []*store.Node
	Outcomes map[uuid.UUID]transcript.SubagentOutcome
	Now      time.Time
}

// Outcome is what the session's parent recorded of a subagent's end.
func (d treeData) Outcome(id uuid.UUID) *transcript.SubagentOutcome {
	if o, ok := d.Outcomes[id]; ok {
		return &o
	}
	return nil
}

// treePage shows the tenant's sessions as trees of forks and subagents,
// as aerie session tree does.
func (s *Server) treePage(w http.ResponseWriter, r *http.Request) {
	tenant, ok := s.tenant(r)
	if !ok {
		s.fail(w, r, http.StatusNotFound, "This console does not show that namespace.", nil)
		return
	}
	list, err := s.o.Store.List(r.Context(), tenant, store.ListOptions{})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "The session store could not be read.", err)
		return
	}
	roots := store.BuildTree(list)
	outcomes, err := store.SubagentOutcomes(r.Context(), s.o.Store, tenant, roots)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "The subagents' outcomes could not be read.", err)
		return
	}
	s.render(w, r, http.StatusOK, "tree", treeData{Title: "Tree", Tenant: tenant, Tenants: s.o.Tenants,
		NS: nsQuery(tenant), Roots: roots, Outcomes: outcomes, Now: s.now()})
}
