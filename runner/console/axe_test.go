package console_test

import (
	"context"
	_ "embed"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// axeSource is axe-core (testdata/axe: its minified build, MPL-2.0, with
// its license), the accessibility checker the browser test runs on the
// pages. Only the test loads it.
//
//go:embed testdata/axe/axe.min.js
var axeSource string

// violation is one rule axe-core found broken, with the first elements
// that break it.
type violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeRun runs axe-core on the document and keeps the serious and critical
// violations.
const axeRun = `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
	.filter(v => v.impact === "serious" || v.impact === "critical")
	.map(v => ({id: v.id, impact: v.impact, help: v.help,
		nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + n.failureSummary)})))`

// bypassCSP lets the test inject axe-core into pages whose
// Content-Security-Policy allows no script but the console's own.
func bypassCSP() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true})
		return err
	})
}

// accessible fails the test for each serious or critical accessibility
// violation axe-core finds on the page the browser shows.
func accessible(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](axeSource)); err != nil {
		t.Fatalf("%s: load axe-core: %v", name, err)
	}
	vs, err := chromedp.Run(ctx, chromedp.Evaluate[[]violation](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: run axe-core: %v", name, err)
	}
	for _, v := range vs {
		t.Errorf("%s: %s accessibility violation %s (%s):\n\t%s", name, v.Impact, v.ID, v.Help,
			strings.Join(v.Nodes, "\n\t"))
	}
	if len(vs) == 0 {
		t.Logf("%s: no serious or critical accessibility violation", name)
	}
}
