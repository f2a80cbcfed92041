package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/aerie-run/aerie/runner/layer"
)

// A marketplace is a catalog of plugins: a directory or git repository with
// one catalog file at its root, the first of MarketplaceFiles. Each entry
// names a plugin and where to fetch it; aerie plugin install NAME@MARKET
// resolves the entry and installs the plugin like any other.

// MarketplaceFiles are the catalog files a marketplace may ship, in
// precedence order: Claude Code's, then Codex's.
var MarketplaceFiles = []ManifestFile{
	{".claude-plugin/marketplace.json", FormatClaude},
	{".agents/plugins/marketplace.json", FormatCodex},
}

// MaxMarketplaceSize bounds a catalog read (the official Claude catalog is
// about 170 KB).
const MaxMarketplaceSize = 8 << 20

// SourceKind says where a marketplace entry's plugin is fetched from.
type SourceKind string

// Source kinds of marketplace entries.
const (
	// SourceRelative is a directory inside the marketplace itself.
	SourceRelative SourceKind = "relative"
	// SourceGit is a git repository, optionally a directory inside it.
	SourceGit SourceKind = "git"
)

// EntrySource is a marketplace entry's source, resolved to one of the two
// kinds: Claude's "./path" strings and Codex's {"source": "local"} are
// relative; Claude's "url", "github" and "git-subdir" objects are git.
type EntrySource struct {
	Kind SourceKind `json:"kind"`
	// Path is the plugin's directory inside the marketplace (relative) or
	// inside the repository (git; empty for its root), cleaned.
	Path string `json:"path,omitempty"`
	// URL is the repository to clone (git); a GitHub repo is spelt
	// https://github.com/OWNER/REPO.git.
	URL string `json:"url,omitempty"`
	// Ref is the branch or tag to clone; the default branch when empty.
	Ref string `json:"ref,omitempty"`
	// SHA pins the commit to install; the head of Ref when empty.
	SHA string `json:"sha,omitempty"`
}

// MarketEntry is one plugin of a marketplace.
type MarketEntry struct {
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Version     string      `json:"version,omitempty"`
	Source      EntrySource `json:"source"`
	// Strict is Claude's strict flag (true unless the entry says false):
	// false means the entry is the plugin's whole manifest, so the
	// plugin's directory needs none of its own.
	Strict bool `json:"strict"`
	// Skills are the entry's skill paths, relative to the plugin's root and
	// cleaned; they are searched after the plugin's own.
	Skills []string `json:"skills,omitempty"`
	// Components are the entry's component fields that aerie does not
	// load (agents, commands, hooks, mcpServers, lspServers, ...).
	Components []string `json:"components,omitempty"`
	// Problem says why the entry cannot be installed; nil when it can.
	Problem error `json:"-"`
}

// Marketplace is a parsed catalog file.
type Marketplace struct {
	Name        string `json:"name"`
	Format      Format `json:"format"`
	Description string `json:"description,omitempty"`
	Owner       string `json:"owner,omitempty"`
	// Entries are the catalog's plugins, in its order.
	Entries []MarketEntry `json:"entries"`
	// Renames maps former entry names to current ones (Claude's renames).
	Renames map[string]string `json:"renames,omitempty"`
}

// Entry returns the entry called name, following a rename, or nil.
func (m *Marketplace) Entry(name string) *MarketEntry {
	if to, ok := m.Renames[name]; ok {
		name = to
	}
	for i := range m.Entries {
		if m.Entries[i].Name == name && m.Entries[i].Problem == nil {
			return &m.Entries[i]
		}
	}
	for i := range m.Entries {
		if m.Entries[i].Name == name {
			return &m.Entries[i]
		}
	}
	return nil
}

// componentFields are the entry fields that carry plugin components aerie
// does not load from a Claude or Codex plugin.
var componentFields = []string{"agents", "commands", fieldHooks, "lspServers", "mcpServers", "outputStyles"}

var (
	githubRepoPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$`)
	})
	shaPattern    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{7,64}$`) })
	refPattern    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]*$`) })
	scpURLPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z0-9_.-]+@[A-Za-z0-9.-]+:[A-Za-z0-9_./~-]+$`)
	})
)

// GitHubURL is the clone URL of a GitHub repository OWNER/REPO. The machine
// git runs on may redirect it (git's url.<base>.insteadOf).
func GitHubURL(repo string) string {
	return "https://github.com/" + strings.TrimSuffix(repo, ".git") + ".git"
}

// IsGitHubShorthand reports whether s is OWNER/REPO.
func IsGitHubShorthand(s string) bool {
	return githubRepoPattern().MatchString(s) && !strings.Contains(s, "..")
}

// CheckGitURL reports why aerie will not clone url, or nil: it takes
// http(s), ssh, git and file URLs and scp-like user@host:path, never git's
// ext:: or fd:: transports (which run commands) nor an option.
func CheckGitURL(url string) error {
	switch {
	case url == "":
		return errors.New("the URL is empty")
	case strings.HasPrefix(url, "-"):
		return fmt.Errorf("URL %q must not start with -", url)
	case strings.ContainsAny(url, " \t\n\r"):
		return fmt.Errorf("URL %q must not contain white space", url)
	}
	for _, scheme := range []string{"https://", "http://", "ssh://", "git://", "file://"} {
		if strings.HasPrefix(url, scheme) && len(url) > len(scheme) {
			return nil
		}
	}
	if scpURLPattern().MatchString(url) {
		return nil
	}
	return fmt.Errorf("URL %q must be an https, http, ssh, git or file URL (or user@host:path)", url)
}

func checkRef(ref string) error {
	if ref != "" && (!refPattern().MatchString(ref) || strings.Contains(ref, "..")) {
		return fmt.Errorf("ref %q must be a branch or tag name", ref)
	}
	return nil
}

// ParseMarketplace parses a catalog file of the given format (FormatClaude
// or FormatCodex). file names it in errors, which are layer.Problems. A
// catalog that is not a JSON object with a valid name and a plugins list is
// an error; an entry that cannot be installed is kept with its Problem, so
// that the rest of the catalog stays usable.
func ParseMarketplace(format Format, file string, data []byte) (*Marketplace, error) {
	fail := func(field, format string, args ...any) error {
		return layer.Problem{File: file, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxMarketplaceSize {
		return nil, fail("", "the catalog is larger than %d bytes", MaxMarketplaceSize)
	}
	if format != FormatClaude && format != FormatCodex {
		return nil, fail("", "unknown marketplace format %q", format)
	}
	var doc struct {
		Name        *string           `json:"name"`
		Description json.RawMessage   `json:"description"`
		Owner       json.RawMessage   `json:"owner"`
		Metadata    json.RawMessage   `json:"metadata"`
		Plugins     []json.RawMessage `json:"plugins"`
		Renames     json.RawMessage   `json:"renames"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fail("", "invalid JSON: %v; a marketplace is an object with name and plugins", err)
	}
	if doc.Name == nil {
		return nil, fail(fieldName, "name is required")
	}
	if err := CheckName(*doc.Name); err != nil {
		return nil, fail(fieldName, "%v", err)
	}
	if doc.Plugins == nil {
		return nil, fail("plugins", "plugins is required: a list of entries")
	}
	m := &Marketplace{Name: *doc.Name, Format: format}
	var meta struct {
		Description json.RawMessage `json:"description"`
		PluginRoot  json.RawMessage `json:"pluginRoot"`
	}
	if len(doc.Metadata) > 0 && string(doc.Metadata) != jsonNull {
		if err := json.Unmarshal(doc.Metadata, &meta); err != nil {
			return nil, fail("metadata", "must be an object")
		}
	}
	var err error
	if m.Description, err = optString(doc.Description); err != nil {
		return nil, fail("description", "%v", err)
	}
	if m.Description == "" {
		if m.Description, err = optString(meta.Description); err != nil {
			return nil, fail("metadata.description", "%v", err)
		}
	}
	root, err := optString(meta.PluginRoot)
	if err == nil && root != "" {
		root, err = cleanRel(root)
	}
	if err != nil {
		return nil, fail("metadata.pluginRoot", "%v", err)
	}
	if m.Owner, err = ownerName(doc.Owner); err != nil {
		return nil, fail("owner", "%v", err)
	}
	if len(doc.Renames) > 0 && string(doc.Renames) != jsonNull {
		if err := json.Unmarshal(doc.Renames, &m.Renames); err != nil {
			return nil, fail("renames", "must be an object from former to current entry names")
		}
	}
	seen := map[string]int{}
	for i, raw := range doc.Plugins {
		e := parseEntry(file, fmt.Sprintf("plugins[%d]", i), root, raw)
		if prev, dup := seen[e.Name]; dup && e.Name != "" && e.Problem == nil {
			e.Problem = fail(fmt.Sprintf("plugins[%d].name", i), "entry %q is already plugins[%d]; rename one", e.Name, prev)
		} else if e.Name != "" {
			if _, ok := seen[e.Name]; !ok {
				seen[e.Name] = i
			}
		}
		m.Entries = append(m.Entries, e)
	}
	return m, nil
}

func ownerName(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == jsonNull {
		return "", nil
	}
	var o struct {
		Name json.RawMessage `json:"name"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", errors.New("must be an object with a name")
	}
	return optString(o.Name)
}

// parseEntry parses one entry; a problem is kept in the entry.
func parseEntry(file, field, pluginRoot string, raw json.RawMessage) (e MarketEntry) {
	e.Strict = true
	fail := func(sub, format string, args ...any) MarketEntry {
		f := field
		if sub != "" {
			f += "." + sub
		}
		e.Problem = layer.Problem{File: file, Field: f, Reason: fmt.Sprintf(format, args...)}
		return e
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return fail("", "must be an object with name and source")
	}
	name, err := optString(fields[fieldName])
	if err != nil {
		return fail(fieldName, "%v", err)
	}
	e.Name = name
	if err := CheckName(name); err != nil {
		return fail(fieldName, "%v", err)
	}
	if e.Description, err = optString(fields["description"]); err != nil {
		return fail("description", "%v", err)
	}
	if e.Version, err = optString(fields[fieldVersion]); err != nil {
		return fail(fieldVersion, "%v", err)
	}
	if s, ok := fields["strict"]; ok && string(s) != jsonNull {
		if err := json.Unmarshal(s, &e.Strict); err != nil {
			return fail("strict", "must be true or false")
		}
	}
	if s, ok := fields["skills"]; ok {
		if e.Skills, err = jsonPaths(s); err != nil {
			return fail("skills", "%v", err)
		}
	}
	for _, c := range componentFields {
		if v, ok := fields[c]; ok && string(v) != jsonNull {
			e.Components = append(e.Components, c)
		}
	}
	sort.Strings(e.Components)
	src, ok := fields[fieldSource]
	if !ok || string(src) == jsonNull {
		return fail(fieldSource, "source is required: a path inside the marketplace or a git source")
	}
	if e.Source, err = parseSource(pluginRoot, src); err != nil {
		var se *sourceErr
		if errors.As(err, &se) {
			return fail("source."+se.field, "%s", se.reason)
		}
		return fail(fieldSource, "%v", err)
	}
	return e
}

type sourceErr struct{ field, reason string }

func (e *sourceErr) Error() string { return e.field + ": " + e.reason }

// parseSource reads an entry's source: a string (Claude's relative path),
// or an object whose "source" says its kind.
func parseSource(pluginRoot string, raw json.RawMessage) (EntrySource, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return relativeSource(pluginRoot, s)
	}
	var o struct {
		Source *string         `json:"source"`
		Path   json.RawMessage `json:"path"`
		URL    json.RawMessage `json:"url"`
		Repo   json.RawMessage `json:"repo"`
		Ref    json.RawMessage `json:"ref"`
		SHA    json.RawMessage `json:"sha"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return EntrySource{}, errors.New("must be a path string or an object with a source kind")
	}
	if o.Source == nil {
		return EntrySource{}, &sourceErr{fieldSource,
			"the kind is required: url, github or git-subdir (Claude), local (Codex)"}
	}
	strs := map[string]string{}
	fields := map[string]json.RawMessage{fieldPath: o.Path, fieldURL: o.URL, "repo": o.Repo, "ref": o.Ref, "sha": o.SHA}
	for k, v := range fields {
		str, err := optString(v)
		if err != nil {
			return EntrySource{}, &sourceErr{k, err.Error()}
		}
		strs[k] = str
	}
	kind := *o.Source
	switch kind {
	case "local", "relative":
		if strs[fieldPath] == "" {
			return EntrySource{}, &sourceErr{fieldPath, "path is required for a local source"}
		}
		return relativeSource(pluginRoot, strs[fieldPath])
	case "github", fieldURL, "git-subdir", "git":
		return gitSource(kind, strs)
	case "npm", "pip":
		return EntrySource{}, &sourceErr{fieldSource, fmt.Sprintf(
			"%s sources are not supported: aerie installs plugins from directories and git repositories", kind)}
	}
	return EntrySource{}, &sourceErr{fieldSource, fmt.Sprintf("unknown source kind %q; the kinds are url, github, "+
		"git-subdir and local", kind)}
}

func relativeSource(pluginRoot, p string) (EntrySource, error) {
	if p == "" {
		return EntrySource{}, errors.New("the path is empty")
	}
	if pluginRoot != "" && !strings.HasPrefix(p, "./") && !strings.HasPrefix(p, "../") {
		p = path.Join(pluginRoot, p)
	}
	c, err := cleanRel(p)
	if err != nil {
		return EntrySource{}, fmt.Errorf("%v; a relative source stays inside the marketplace", err)
	}
	return EntrySource{Kind: SourceRelative, Path: c}, nil
}

func gitSource(kind string, s map[string]string) (EntrySource, error) {
	src := EntrySource{Kind: SourceGit, Ref: s["ref"], SHA: s["sha"]}
	switch kind {
	case "github":
		if !IsGitHubShorthand(s["repo"]) {
			return src, &sourceErr{"repo", fmt.Sprintf("repo %q must be OWNER/REPO", s["repo"])}
		}
		src.URL = GitHubURL(s["repo"])
	default:
		src.URL = s["url"]
		if src.URL == "" && s["repo"] != "" {
			src.URL = s["repo"]
		}
		if IsGitHubShorthand(src.URL) {
			src.URL = GitHubURL(src.URL)
		}
		if err := CheckGitURL(src.URL); err != nil {
			return src, &sourceErr{"url", err.Error()}
		}
	}
	if kind == "git-subdir" && s[fieldPath] == "" {
		return src, &sourceErr{fieldPath, "path is required for a git-subdir source"}
	}
	if s[fieldPath] != "" {
		c, err := cleanRel(strings.TrimPrefix(s[fieldPath], "./"))
		if err != nil {
			return src, &sourceErr{fieldPath, err.Error()}
		}
		if c != "." {
			src.Path = c
		}
	}
	if err := checkRef(src.Ref); err != nil {
		return src, &sourceErr{"ref", err.Error()}
	}
	if src.SHA != "" && !shaPattern().MatchString(src.SHA) {
		return src, &sourceErr{"sha", fmt.Sprintf("sha %q must be a lowercase hexadecimal commit id", src.SHA)}
	}
	return src, nil
}

// jsonPaths reads a JSON path or list of paths, cleaned and kept inside
// the plugin.
func jsonPaths(raw json.RawMessage) ([]string, error) {
	if string(raw) == jsonNull {
		return nil, nil
	}
	var list []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("must be a path or a list of paths")
	}
	out := make([]string, 0, len(list))
	for _, p := range list {
		c, err := cleanRel(p)
		if err != nil {
			return nil, err
		}
		if !contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}
