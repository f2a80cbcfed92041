package userlayer

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/skills"
)

// ActivationBoundary is where a managed change takes effect, as the
// sidecar records it.
const ActivationBoundary = "next_turn"

// MaxContentBytes caps an artifact's content: the spec's 256 KiB.
const MaxContentBytes = layer.MaxArtifactBytes

// Options configure a Manager.
type Options struct {
	// Layers are the session's layers, nearest first. The user layer is
	// the one of kind home; the layers before it are checked for
	// collisions.
	Layers []layer.Layer
	// Workspace is the workspace root, through which project layers are
	// read; WorkDir is the agent's working directory, where hooks run.
	Workspace, WorkDir string
	// Builtins are the names of the built-in tools, which a custom tool
	// cannot take.
	Builtins []string
	// NewOperationID returns the id of an operation; nil uses random
	// UUIDs.
	NewOperationID func() string
}

// Manager carries out extension_manage requests on one user layer. It is
// safe for concurrent use; changes by other processes are serialized by a
// lock file in the layer.
type Manager struct {
	home   layer.Layer
	nearer []layer.Layer
	opts   Options

	mu sync.Mutex
	// pending are the artifacts (absolute paths) changed since the session
	// last loaded its extensions.
	pending map[string]bool
	// loaded are the states of the user layer's artifacts in the session's
	// last load, by path (a skill by its directory).
	loaded map[string]layer.Artifact

	// fault, in tests, fails the step it is called with.
	fault func(step string) error
}

// ErrNoUserLayer means the session has no user layer to manage.
var ErrNoUserLayer = errors.New("no user layer: the session's layers hold no $AERIE_HOME layer")

// New returns the manager of the user layer among opts.Layers.
func New(opts Options) (*Manager, error) {
	i := slices.IndexFunc(opts.Layers, func(l layer.Layer) bool { return l.Kind == layer.KindHome })
	if i < 0 {
		return nil, ErrNoUserLayer
	}
	home := opts.Layers[i]
	if !filepath.IsAbs(home.Dir) {
		return nil, fmt.Errorf("user layer %s: directory %q is not absolute", home.Name, home.Dir)
	}
	if opts.NewOperationID == nil {
		opts.NewOperationID = uuid.NewString
	}
	return &Manager{
		home: home, nearer: slices.Clone(opts.Layers[:i]), opts: opts,
		pending: map[string]bool{}, loaded: map[string]layer.Artifact{},
	}, nil
}

// Layer returns the user layer.
func (m *Manager) Layer() layer.Layer { return m.home }

// Result is what a successful request did.
type Result struct {
	Operation Operation `json:"operation"`
	Kind      Kind      `json:"kind,omitempty"`
	Name      string    `json:"name,omitempty"`
	// Path is the artifact's file.
	Path string `json:"path,omitempty"`
	// Digest is the artifact's digest after a create or replace, the
	// deleted bytes' after a delete.
	Digest string `json:"digest,omitempty"`
	// PreviousDigest is the replaced bytes' digest.
	PreviousDigest string `json:"previous_digest,omitempty"`
	// OperationID identifies the change in the provenance sidecar.
	OperationID string `json:"operation_id,omitempty"`
	// State is the artifact's lifecycle state: pending_reload after a
	// change.
	State layer.Status `json:"state,omitempty"`
	// Note says what else to know: when the change takes effect, why it
	// will stay inactive.
	Note string `json:"note,omitempty"`
	// Artifacts are what list found.
	Artifacts []Entry `json:"artifacts,omitempty"`
}

// Entry is one artifact of the user layer, as list reports it: metadata,
// never the body.
type Entry struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name,omitempty"`
	Path string `json:"path"`
	// Digest is the value expected_digest takes to replace or delete it.
	Digest     string            `json:"digest,omitempty"`
	Size       int64             `json:"size"`
	Provenance layer.Provenance  `json:"provenance"`
	State      layer.Status      `json:"state"`
	Trust      layer.TrustStatus `json:"trust,omitempty"`
	// Reason says why an artifact is inactive.
	Reason string `json:"reason,omitempty"`
}

// Apply carries out req. The error is an *Error.
func (m *Manager) Apply(ctx context.Context, req Request) (Result, error) {
	if err := req.Validate(); err != nil {
		return Result{}, err
	}
	if req.Operation == OpList {
		return m.list(ctx, req.Kind)
	}
	rel := Path(req.Kind, req.Name)
	name := req.Name
	if name == "" {
		name = fileOf(req.Kind)
	}
	var content []byte
	if req.Content != nil {
		content = []byte(*req.Content)
		if err := m.check(req.Kind, req.Name, rel, content); err != nil {
			return Result{}, err
		}
		if err := m.collision(req.Kind, req.Name); err != nil {
			return Result{}, err
		}
	}
	res := Result{
		Operation: req.Operation,
		Kind:      req.Kind,
		Name:      name,
		Path:      filepath.Join(m.home.Dir, filepath.FromSlash(rel)),
	}
	ch, err := m.commit(ctx, req, rel, content)
	if err != nil {
		return Result{}, err
	}
	res.OperationID, res.PreviousDigest = ch.operationID, ch.previous
	if req.Operation == OpDelete {
		res.Digest = ch.previous
		res.PreviousDigest = ""
	} else {
		res.Digest = layer.Digest(content)
	}
	res.State = layer.StatusPendingReload
	res.Note = m.note(req)

	m.mu.Lock()
	m.pending[res.Path] = true
	m.mu.Unlock()
	return res, nil
}

// note tells the model when a change takes effect and what it still needs.
func (m *Manager) note(req Request) string {
	n := "The change takes effect at the next turn boundary, when the session reloads its extensions."
	if req.Operation == OpDelete {
		return n
	}
	switch req.Kind {
	case KindTool, KindHooks:
		n += " extension_manage never grants trust: an agent-authored " + string(req.Kind) +
			" stays inactive until a person reviews it and adds its trust pin to $AERIE_HOME/" + layer.TrustFile +
			" (aerie extensions shows the pin). Do not rely on it in this session."
	case KindSkill:
		n += " A skill of the same name in a nearer place (the project's skills) still wins."
	}
	return n
}

// check applies every content rule and the kind's production parser.
func (m *Manager) check(kind Kind, name, rel string, content []byte) *Error {
	switch {
	case len(content) > MaxContentBytes:
		return fail(
			InvalidContent, "content",
			"%d bytes, over the %d KiB limit; make the artifact smaller",
			len(content), MaxContentBytes>>10,
		)
	case len(strings.TrimSpace(string(content))) == 0:
		return fail(InvalidContent, "content", "empty; give the artifact's complete content (to remove it, use delete)")
	case strings.IndexByte(string(content), 0) >= 0:
		return fail(InvalidContent, "content", "holds a null byte; artifacts are text, remove it")
	case !utf8.Valid(content):
		return fail(InvalidContent, "content", "is not valid UTF-8 text; artifacts are text")
	}
	if s, ok := FindSecret(content); ok {
		return fail(
			InvalidContent, "content",
			"line %d holds what looks like %s; remove it and read the credential from the environment at run time instead",
			s.Line, s.Kind,
		)
	}
	switch kind {
	case KindSkill:
		fm, err := skills.ParseFrontmatter(content)
		if err != nil {
			return fail(
				InvalidContent, "content",
				"SKILL.md frontmatter: %v; start with a line ---, then name: and description: fields, then a line ---",
				err,
			)
		}
		if fm.Name != "" && fm.Name != name {
			return fail(
				InvalidContent, "content",
				"the frontmatter's name %q differs from the request's name %q; make them the same",
				fm.Name, name,
			)
		}
	case KindTool:
		mf, err := extensions.ParseManifest(rel, content)
		if err != nil {
			return fail(InvalidContent, "content", "tool manifest: %v", err)
		}
		if mf.Name != name {
			return fail(
				InvalidContent, "content",
				"the manifest's name %q differs from the request's name %q; make them the same",
				mf.Name, name,
			)
		}
		if slices.Contains(m.opts.Builtins, name) {
			return fail(
				NameCollision, "name",
				"%s is a built-in tool, and custom tools cannot shadow built-ins; choose another name",
				name,
			)
		}
	case KindHooks:
		file := filepath.Join(m.home.Dir, HooksFile)
		src := hooks.Source{Layer: m.home, File: file, Dir: m.home.Dir, Root: m.home.Dir}
		if _, probs := hooks.ParseTOML(content, src, m.opts.WorkDir); len(probs) > 0 {
			p := probs[0]
			msg := p.Reason
			if p.Field != "" {
				msg = p.Field + ": " + msg
			}
			if len(probs) > 1 {
				msg += fmt.Sprintf(" (and %d more problems)", len(probs)-1)
			}
			return fail(InvalidContent, "content", "hooks.toml: %s", msg)
		}
	}
	return nil
}

// collision refuses an artifact a nearer layer defines: it would shadow
// the user layer's copy, and the change would have no effect.
func (m *Manager) collision(kind Kind, name string) *Error {
	if len(m.nearer) == 0 {
		return nil
	}
	src := layer.Source{Layers: m.nearer, Workspace: m.opts.Workspace, WorkDir: m.opts.WorkDir}
	switch kind {
	case KindTool:
		_, arts, err := extensions.LoadTools(src, extensions.ToolOptions{})
		if err != nil {
			return storage(fmt.Errorf("read the nearer layers' tools: %w", err))
		}
		for _, a := range arts {
			if a.Type == extensions.TypeTool && a.Name == name && a.Status != layer.StatusSkipped {
				return fail(
					NameCollision, "name",
					"the %s layer %s defines a tool %s (%s), which wins over the user layer's; choose another name",
					a.LayerKind, a.Layer, name, a.Path,
				)
			}
		}
	case KindSystemPrompt:
		_, arts, err := extensions.ComposePrompt(src, "")
		if err != nil {
			return storage(fmt.Errorf("read the nearer layers' prompts: %w", err))
		}
		for _, a := range arts {
			if a.Type == extensions.TypeSystemPrompt && a.Layer != layer.EnvironmentLayer {
				return fail(
					NameCollision, "kind",
					"the %s layer %s has a %s (%s), which replaces the persona prompt before the "+
						"user layer's would; change that file, or use append_system",
					a.LayerKind, a.Layer, extensions.SystemFile, a.Path,
				)
			}
		}
	case KindHooks:
		loaded, _ := hooks.Load(m.nearer, nil, hooks.LoadOptions{Dir: m.opts.WorkDir})
		for _, f := range loaded.Files {
			if f.Format == hooks.FormatTOML {
				return fail(
					NameCollision, "kind",
					"the %s layer %s has a %s (%s), and the nearest hooks.toml wins; change that file instead",
					f.Layer.Kind, f.Layer.Name, HooksFile, f.Path,
				)
			}
		}
	}
	return nil
}

func storage(err error) *Error {
	return &Error{
		Category: StorageUnavailable,
		Message:  sanitize(err.Error()) + "; check that $AERIE_HOME is a writable directory, then retry",
		Err:      err,
	}
}

// sanitize keeps a storage error's message to one line.
func sanitize(s string) string { return strings.Join(strings.Fields(s), " ") }

// Pending returns the artifacts changed since the session last loaded its
// extensions, in order.
func (m *Manager) Pending() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for p := range m.pending {
			if !yield(p) {
				return
			}
		}
	})
}

// Reloaded records the session's new extension report: the changes in
// applied (what Pending returned before the reload) are no longer pending,
// and list reports the states r gives the user layer's artifacts.
func (m *Manager) Reloaded(r layer.Report, applied []string) {
	loaded := map[string]layer.Artifact{}
	for _, a := range r.Artifacts {
		if insideDir(m.home.Dir, a.Path) {
			loaded[a.Path] = a
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range applied {
		delete(m.pending, p)
	}
	m.loaded = loaded
}

// state is an artifact's lifecycle state as list reports it: pending until
// the session reloads, then what the reload made of it.
func (m *Manager) state(e *Entry, key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending[e.Path] {
		e.State, e.Reason = layer.StatusPendingReload, "changed in this session; it takes effect at the next turn boundary"
		return
	}
	a, ok := m.loaded[key]
	if !ok {
		e.State, e.Reason = layer.StatusInactive, "not loaded in this session"
		return
	}
	e.Trust = a.Trust
	switch a.Status {
	case layer.StatusActive, layer.StatusPendingReload:
		e.State = a.Status
	default:
		e.State = layer.StatusInactive
		e.Reason = a.Reason
		if e.Reason == "" {
			e.Reason = string(a.Status)
		}
	}
}

func insideDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !path.IsAbs(rel)
}
