package session

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/extensions/userlayer"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/skills"
)

// turnBoundary is the loop's BeforeRequest: at each turn boundary, lost
// MCP servers are reconnected, and changes extension_manage made during
// the last turn take effect.
func (eq *equipment) turnBoundary(loop func() *agent.Loop) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := eq.ensureMCP(ctx); err != nil {
			return err
		}
		eq.reload(loop())
		return nil
	}
}

// reload is the session's reload coordinator. When extension_manage
// changed the user layer, the extensions are discovered again with the
// same loader as at the start, and the tools, the hook engine, the system
// prompt and the skills catalog are swapped together for the next model
// request. It runs only between turns, on the loop's goroutine, so a turn
// never sees half of a change. A reload that fails (a file that no longer
// parses, a toolset gone) keeps what was loaded before; both outcomes are
// reported as an extensions_reload event.
func (eq *equipment) reload(loop *agent.Loop) {
	opts := eq.opts
	if eq.manager == nil {
		return
	}
	changed := eq.manager.Pending()
	if len(changed) == 0 {
		return
	}
	l, err := eq.rebuild()
	if err != nil {
		eq.manager.Reloaded(eq.ext.Report(), changed)
		opts.Logger.Warn("reload extensions; keeping those loaded before", "session", eq.session, "err", err)
		emit(opts.Observe, events.Event{Type: events.Reload, Session: eq.session, Status: "failed",
			Reason: err.Error() + "; the extensions loaded before stay in use", Text: strings.Join(changed, "\n")})
		return
	}
	eq.loadout = l
	loop.SetSystem(eq.systemPrompt())
	loop.SetTools(eq.loopTools())
	eq.compactor.SetFixed(eq.systemPrompt(), eq.reg.Definitions())
	report := l.ext.Report()
	eq.manager.Reloaded(report, changed)
	emit(opts.Observe, events.Event{
		Type: events.Reload, Session: eq.session, Status: "reloaded", Text: describeChanges(report, changed),
	})
}

func (eq *equipment) rebuild() (loadout, error) {
	x, err := LoadExtensions(eq.load)
	if err != nil {
		return loadout{}, err
	}
	if err := x.Err(); err != nil {
		return loadout{}, err
	}
	warnProblems(eq.opts.Logger, x)
	return eq.build(x)
}

// describeChanges says, a line per changed artifact, what the reload made
// of it: "<path>: active", "<path>: inactive (untrusted): <reason>", or
// "<path>: removed".
func describeChanges(r layer.Report, changed []string) string {
	var b strings.Builder
	for i, p := range changed {
		if i > 0 {
			b.WriteByte('\n')
		}
		a, ok := findArtifact(r, p)
		switch {
		case !ok:
			fmt.Fprintf(&b, "%s: removed", p)
		case a.Trust != "" && a.Trust != layer.Trusted:
			fmt.Fprintf(&b, "%s: %s (%s): %s", p, a.Status, a.Trust, a.Reason)
		case a.Reason != "":
			fmt.Fprintf(&b, "%s: %s: %s", p, a.Status, a.Reason)
		default:
			fmt.Fprintf(&b, "%s: %s", p, a.Status)
		}
	}
	return b.String()
}

// findArtifact finds the artifact of file p in r; a skill is reported by
// its directory.
func findArtifact(r layer.Report, p string) (layer.Artifact, bool) {
	for _, a := range r.Artifacts {
		if isArtifact(a, p) {
			return a, true
		}
	}
	return layer.Artifact{}, false
}

// report is the extensions report of the run: the artifacts of the last
// load, and those extension_manage changed since, pending_reload.
func (eq *equipment) report() layer.Report {
	r := eq.ext.Report()
	if eq.manager == nil {
		return r
	}
	for _, p := range eq.manager.Pending() {
		for i := range r.Artifacts {
			a := &r.Artifacts[i]
			if isArtifact(*a, p) {
				a.Status = layer.StatusPendingReload
				a.Reason = "changed by extension_manage; it takes effect at the next turn boundary"
			}
		}
	}
	return r
}

// isArtifact reports whether a is the artifact of file p: a skill is
// reported by its directory.
func isArtifact(a layer.Artifact, p string) bool {
	return a.Path == p || a.Type == skills.TypeSkill && filepath.Join(a.Path, userlayer.SkillFile) == p
}
