package console

import (
	"fmt"
	"html/template"
	"time"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"cost":  costOf,
	"short": func(id uuid.UUID) string { return id.String()[:8] },
	"when":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"dur":   func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"add":   func(a, b int) int { return a + b },
	"usageTokens": func(u *transcript.Usage) string {
		if u == nil {
			return "-"
		}
		return fmt.Sprintf("%d in / %d out", u.InputTokens, u.OutputTokens)
	},
}

// costOf is a usage's cost in US dollars, - when unknown.
func costOf(u *transcript.Usage) string {
	if u == nil || !(u.CostUSD > 0) {
		return "-"
	}
	return fmt.Sprintf("$%.4f", u.CostUSD)
}

// itemView is an item with the ?ns= query of its links.
type itemView struct {
	It item
	NS string
}

// nodesView is nodes of the tree page's trees, with the page's data.
type nodesView struct {
	Nodes []*store.Node
	D     treeData
}

func init() {
	funcs["itemOf"] = func(it item, ns string) itemView { return itemView{It: it, NS: ns} }
	funcs["nodesOf"] = func(n []*store.Node, d treeData) nodesView { return nodesView{Nodes: n, D: d} }
	funcs["itemsOf"] = func(its []item, ns string) itemsData { return itemsData{Items: its, NS: ns} }
}
