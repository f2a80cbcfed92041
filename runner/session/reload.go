package session

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aerie-run/aerie/runner/events"

	"github.com/aerie-run/aerie/runner/agent"
	"github.com/aerie-run/aerie/runner/extensions/userlayer"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/skills"
)

// turnBoundary is the loop's BeforeRequest: at each turn boundary, lost
// MCP servers are reconnected, and changes extension_manage made during
// the last turn take effect.
func (k *kit) turnBoundary(opts Options, loop func() *agent.Loop) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := k.ensureMCP(ctx); err != nil {
			return err
		}
		k.reload(opts, loop())
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
func (k *kit) reload(opts Options, loop *agent.Loop) {
	if k.manager == nil {
		return
	}
	changed := k.manager.Pending()
	if len(changed) == 0 {
		return
	}
	l, err := k.rebuild(opts)
	if err != nil {
		k.manager.Reloaded(k.ext.Report(), changed)
		opts.Logger.Warn("reload extensions; keeping those loaded before", "session", k.session, "err", err)
		emit(opts.Observe, events.Event{Type: events.Reload, Session: k.session, Status: "failed",
			Reason: err.Error() + "; the extensions loaded before stay in use", Text: strings.Join(changed, "\n")})
		return
	}
	k.use(l)
	loop.SetSystem(k.systemPrompt())
	loop.SetTools(k.loopTools())
	report := l.ext.Report()
	k.manager.Reloaded(report, changed)
	emit(opts.Observe, events.Event{Type: events.Reload, Session: k.session, Status: "reloaded", Text: describeChanges(report, changed)})
}

func (k *kit) rebuild(opts Options) (loadout, error) {
	x, err := LoadExtensions(k.load)
	if err != nil {
		return loadout{}, err
	}
	if err := x.Err(); err != nil {
		return loadout{}, err
	}
	warnProblems(opts.Logger, x)
	return k.build(x, opts)
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
func (k *kit) report() layer.Report {
	r := k.ext.Report()
	if k.manager == nil {
		return r
	}
	for _, p := range k.manager.Pending() {
		for i := range r.Artifacts {
			a := &r.Artifacts[i]
			if isArtifact(*a, p) {
				a.Status, a.Reason = layer.StatusPendingReload, "changed by extension_manage; it takes effect at the next turn boundary"
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
