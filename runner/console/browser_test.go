package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/console"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// browser starts a headless Chromium of its own (a fresh profile, nothing
// that reaches out to the network) and returns a context of a tab in it.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin := testenv.Chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return ctx
}

// shot saves a screenshot of the page as name.png among the test's
// artifacts (kept with go test -artifacts).
func shot(dir, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, tg) // 100: PNG
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	})
}

// css is a CSS selector's query.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// do runs the actions of a step of the test.
func do(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// value runs an action that returns a value.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBrowser reads and uses the console in a real browser: the sessions
// page, a session of 300 entries with a subagent and a compaction whose
// tool result it expands, a live session it follows until it ends, a
// pending call it approves, and the overview's charts.
func TestBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	var dialogs atomic.Int32
	opened := make(chan struct{}, 8)
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
			select {
			case opened <- struct{}{}:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range opened { // a dialog would stall the page: dismiss it
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	}()
	st := backends()[0].open(t)
	f := seed(t, st, 300)
	srv := serve(t, st, console.Options{})
	dir := t.ArtifactDir()
	t.Logf("screenshots in %s", dir)

	do(t, ctx, "open the sessions page",
		bypassCSP(), // for axe-core, which accessible injects
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(css("table.sessions")),
		shot(dir, "sessions"))
	accessible(t, ctx, "sessions page")
	if count := value(t, ctx, chromedp.Text(css("#count"))); !strings.HasPrefix(count, "3 sessions") {
		t.Errorf("sessions page counts %q, want 3 sessions", count)
	}

	do(t, ctx, "open the 300-entry session",
		chromedp.Click(css(`a.session-link[href^="/sessions/`+f.big.ID.String()+`"]`)),
		chromedp.WaitVisible(css("#transcript")))
	accessible(t, ctx, "session page")
	xssText := value(t, ctx, chromedp.Text(css("article.entry-user pre.text")))
	scripts := value(t, ctx, chromedp.Evaluate[int](`document.scripts.length`))
	if !strings.Contains(xssText, xss) || dialogs.Load() != 0 || scripts != 1 {
		t.Errorf("the entry %q shows as %q with %d dialogs and %d scripts, want it as text, no dialog, one script",
			xss, xssText, dialogs.Load(), scripts)
	}
	do(t, ctx, "expand a tool result",
		chromedp.Click(css(`#transcript details.tool > summary`)),
		chromedp.WaitVisible(css(`#transcript details.tool[open] pre.result`)))
	result := value(t, ctx, chromedp.Text(css(`#transcript details.tool[open] pre.result`)))
	if !strings.Contains(result, "token=[redacted]") || strings.Contains(result, secret) {
		t.Errorf("expanded tool result %q, want it with the secret redacted", result)
	}
	do(t, ctx, "open the subagent's thread",
		chromedp.Click(css(`details.thread-body > summary`)),
		chromedp.WaitVisible(css(`details.thread-body[open] article.entry-assistant`)),
		shot(dir, "session-tool-result"))
	if child := value(t, ctx, chromedp.Text(css(`details.thread-body[open] article.entry-assistant pre.text`))); child != "child answer" {
		t.Errorf("subagent thread shows %q, want the child's answer", child)
	}
	do(t, ctx, "find the compaction",
		chromedp.ScrollIntoView(css(`article.entry-compaction`)),
		chromedp.WaitVisible(css(`article.compacted`)),
		shot(dir, "session-compaction"))

	live := startLive(t, st)
	do(t, ctx, "follow a live session until it finishes",
		chromedp.Navigate(srv.URL+"/sessions/"+live.ID.String()),
		chromedp.WaitVisible(css("#live")),
		chromedp.Func(func(context.Context, *chromedp.Target) error { go finishLive(t, st, live); return nil }),
		chromedp.WaitVisible(css(`#live[data-ended]`)),
		shot(dir, "live"))
	ended := value(t, ctx, chromedp.AttributeValue(css("#live"), "data-ended"))
	steps := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#transcript article.entry-assistant").length`))
	if ended.Value != string(store.StateCompleted) || steps != liveSteps {
		t.Errorf("followed the live session to %q with %d new entries, want completed with %d", ended.Value, steps, liveSteps)
	}

	do(t, ctx, "approve a pending call",
		chromedp.Navigate(srv.URL+"/sessions/"+f.pending.ID.String()),
		chromedp.WaitVisible(css("form.decide")))
	accessible(t, ctx, "pending approval")
	do(t, ctx, "decide the pending call",
		chromedp.SendKeys(css(`form.decide input[name="reason"]`), "fine by me"),
		shot(dir, "pending"),
		chromedp.Click(css(`form.decide button[value="approve"]`)),
		chromedp.WaitVisible(css(".flash")),
		shot(dir, "approved"))
	if flash := value(t, ctx, chromedp.Text(css(".flash"))); !strings.Contains(flash, "approved") {
		t.Errorf("after approving, the page says %q", flash)
	}
	entries, err := st.Entries(context.Background(), tenant, f.pending.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := entries[len(entries)-1].Payload.(transcript.ApprovalDecision); !ok || !d.Allowed || d.Reason != "fine by me" {
		t.Errorf("last entry %+v, want the approval with its reason", entries[len(entries)-1].Payload)
	}

	do(t, ctx, "draw the overview's charts",
		chromedp.Navigate(srv.URL+"/overview"),
		chromedp.WaitVisible(css(`[data-chart="cost-by-model"][data-drawn="true"] canvas`)),
		shot(dir, "overview"))
	accessible(t, ctx, "overview")
}

// liveSteps is how many entries finishLive appends.
const liveSteps = 5

func startLive(t *testing.T, st store.Store) store.Session {
	t.Helper()
	sess, err := st.Create(context.Background(), tenant, store.NewSession{Label: "live", State: store.StateActive,
		Entries: []transcript.Entry{{Seq: 1, Payload: transcript.UserMessage{Content: text("start")}, CreatedAt: time.Now()}}})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// finishLive appends liveSteps assistant messages to the live session, as
// a run would, and ends it.
func finishLive(t *testing.T, st store.Store, sess store.Session) {
	ctx := context.Background()
	for i := int64(2); i < 2+liveSteps; i++ {
		time.Sleep(100 * time.Millisecond)
		e := transcript.Entry{Seq: i, Payload: transcript.AssistantMessage{Content: text("step")}, CreatedAt: time.Now()}
		if err := st.Append(ctx, tenant, sess.ID, []transcript.Entry{e}); err != nil {
			t.Error(err)
			return
		}
	}
	if err := st.SetState(ctx, tenant, sess.ID, store.StateCompleted); err != nil {
		t.Error(err)
	}
}
