package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/atomicfile"
	"github.com/aerie-run/aerie/runner/layer"
)

// InstallFile is the provenance record aerie plugin install writes into the
// plugin's directory; aerie plugin update reads it.
const InstallFile = ".aerie-install.yaml"

// Install is what an install record says.
type Install struct {
	// Source is the local directory or git URL installed from.
	Source string `yaml:"source" json:"source"`
	// Ref is the branch or tag asked for (git sources only).
	Ref string `yaml:"ref,omitempty" json:"ref,omitempty"`
	// Path is the plugin's directory inside the source.
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// Commit is the commit installed (git sources only).
	Commit string `yaml:"commit,omitempty" json:"commit,omitempty"`
	// InstalledAt is when the plugin was installed or last updated.
	InstalledAt time.Time `yaml:"installed_at" json:"installed_at"`
	// Enabled is false after aerie plugin disable.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Marketplace and Entry name the marketplace entry installed with
	// aerie plugin install ENTRY@MARKETPLACE; aerie plugin update resolves
	// the entry again.
	Marketplace string `yaml:"marketplace,omitempty" json:"marketplace,omitempty"`
	Entry       string `yaml:"entry,omitempty" json:"entry,omitempty"`
	// Manifest is what the marketplace entry contributes to the plugin's
	// manifest, when it does.
	Manifest *EntryManifest `yaml:"manifest,omitempty" json:"manifest,omitempty"`
	// Components are the components of a Claude or Codex plugin to load
	// (aerie plugin install --components); empty means the
	// configuration's [plugins] components.
	Components []string `yaml:"components,omitempty" json:"components,omitempty"`
}

// EntryManifest is the manifest a marketplace entry gives a plugin. For a
// plugin without a manifest of its own (an entry with strict: false, or a
// Claude plugin that relies on its entry) it is the whole manifest: Name is
// set. Otherwise it only adds skill paths, searched after the plugin's own.
type EntryManifest struct {
	Format      Format   `yaml:"format" json:"format"`
	Name        string   `yaml:"name,omitempty" json:"name,omitempty"`
	Version     string   `yaml:"version,omitempty" json:"version,omitempty"`
	Description string   `yaml:"description,omitempty" json:"description,omitempty"`
	Skills      []string `yaml:"skills,omitempty" json:"skills,omitempty"`
}

// manifest checks an install record's entry manifest as a manifest of its
// own: a record travels in packed layers, so it is input like any other.
func (em *EntryManifest) manifest(file string) (*Manifest, error) {
	fail := func(field string, err error) error {
		return layer.Problem{File: file, Field: "manifest." + field, Reason: err.Error()}
	}
	if em.Format != FormatClaude && em.Format != FormatCodex {
		return nil, fail("format", fmt.Errorf("format %q must be claude or codex", em.Format))
	}
	m := &Manifest{Format: em.Format, Name: em.Name, Version: em.Version, Description: em.Description}
	if em.Name != "" {
		if err := CheckName(em.Name); err != nil {
			return nil, fail(fieldName, err)
		}
		m.Skills = []string{DefaultSkillsDir}
	}
	for _, p := range em.Skills {
		c, err := cleanRel(p)
		if err != nil {
			return nil, fail("skills", err)
		}
		if !contains(m.Skills, c) {
			m.Skills = append(m.Skills, c)
		}
	}
	return m, nil
}

func readInstall(fsys fs.FS, rel string) (*Install, error) {
	data, err := readLimited(fsys, path.Join(rel, InstallFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", InstallFile, err)
	}
	var in Install
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&in); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s in %s: %w; reinstall the plugin", InstallFile, rel, err)
	}
	return &in, nil
}

// writeInstall replaces dir's install record atomically.
func writeInstall(dir string, in *Install) error {
	data, err := yaml.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode install record: %w", err)
	}
	data = append([]byte("# Written by aerie plugin install; do not edit.\n"), data...)
	if err := atomicfile.Write(filepath.Join(dir, InstallFile), data, 0o600); err != nil {
		return fmt.Errorf("write install record: %w", err)
	}
	return nil
}

// Manager changes the installed plugins in one plugins directory
// ($AERIE_HOME/plugins). Every change is staged, then Check runs — it loads
// the full configuration — and a failing Check undoes the change.
type Manager struct {
	// Dir is the plugins directory.
	Dir string
	// MarketDir holds the marketplace records and the clones of git
	// marketplaces ($AERIE_HOME/marketplaces).
	MarketDir string
	// Check loads the configuration after a change; nil accepts every
	// change.
	Check func() error
	// Git is the git binary; "git" when empty.
	Git string
	// Env is the environment git runs with; os.Environ() when nil.
	Env []string
	// Now gives the install time; time.Now when nil.
	Now func() time.Time
}

// InstallOptions say what to install.
type InstallOptions struct {
	// Source is a local directory or a git URL. A source that is not an
	// existing directory, or any source with a Ref, is cloned with git.
	Source string
	// Path is the plugin's directory inside the source; its root when empty.
	Path string
	// Ref is a branch or tag to clone (git only); the default branch when
	// empty.
	Ref string
	// SHA is the commit to check out (git only); the head of Ref when
	// empty.
	SHA string
	// Components, when not nil, are recorded as the components of a Claude
	// or Codex plugin to load, in place of the configuration's.
	Components Components
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now().UTC()
	}
	return time.Now().UTC()
}

func (m *Manager) check() error {
	if m.Check == nil {
		return nil
	}
	return m.Check()
}

// Install installs a plugin and returns its name.
func (m *Manager) Install(ctx context.Context, o InstallOptions) (string, error) {
	sub, err := subPath(o.Path)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return "", fmt.Errorf("install plugin: %w", err)
	}
	stage, rec, err := m.fetch(ctx, InstallOptions{Source: o.Source, Path: sub, Ref: o.Ref, SHA: o.SHA})
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage) //nolint:errcheck // best-effort removal of the staging directory
	mf, err := manifestOf(stage)
	if err != nil {
		return "", fmt.Errorf("install plugin: %w", err)
	}
	rec.Components = o.Components.Strings()
	return m.place(stage, rec, mf.Name)
}

// place moves a staged plugin into m.Dir/name with its install record, and
// removes it again when the configuration does not load with it.
func (m *Manager) place(stage string, rec *Install, name string) (string, error) {
	rec.Enabled = true
	if err := writeInstall(stage, rec); err != nil {
		return "", err
	}
	dest := filepath.Join(m.Dir, name)
	if _, err := os.Lstat(dest); err == nil {
		return "", fmt.Errorf(
			"install plugin: %s is already installed in %s; uninstall it or use aerie plugin update", name, dest)
	}
	if err := os.Rename(stage, dest); err != nil {
		return "", fmt.Errorf("install plugin: %w", err)
	}
	if err := m.check(); err != nil {
		_ = os.RemoveAll(dest)
		return "", fmt.Errorf("install plugin %s: the configuration does not load with it, so it was removed: %w",
			name, err)
	}
	return name, nil
}

// SetEnabled enables or disables an installed plugin.
func (m *Manager) SetEnabled(name string, enabled bool) error {
	dir, rec, err := m.installed(name)
	if err != nil {
		return err
	}
	if rec.Enabled == enabled {
		return nil
	}
	before := *rec
	rec.Enabled = enabled
	if err := writeInstall(dir, rec); err != nil {
		return err
	}
	if err := m.check(); err != nil {
		if rerr := writeInstall(dir, &before); rerr != nil {
			return errors.Join(err, rerr)
		}
		return fmt.Errorf("the configuration does not load with plugin %s %s, so the change was undone: %w",
			name, verb(enabled), err)
	}
	return nil
}

func verb(enabled bool) string {
	if enabled {
		return "enabled"
	}
	return "disabled"
}

// Uninstall removes an installed plugin.
func (m *Manager) Uninstall(name string) error {
	dir, _, err := m.installed(name)
	if err != nil {
		return err
	}
	trash, err := os.MkdirTemp(m.Dir, ".uninstall-")
	if err != nil {
		return fmt.Errorf("uninstall plugin: %w", err)
	}
	defer os.RemoveAll(trash) //nolint:errcheck // best-effort removal of the uninstalled copy
	moved := filepath.Join(trash, name)
	if err := os.Rename(dir, moved); err != nil {
		return fmt.Errorf("uninstall plugin: %w", err)
	}
	if err := m.check(); err != nil {
		if rerr := os.Rename(moved, dir); rerr != nil {
			return errors.Join(err, rerr)
		}
		return fmt.Errorf("the configuration does not load without plugin %s, so it was kept: %w", name, err)
	}
	return nil
}

// Update fetches an installed plugin again from its recorded source and
// replaces it, keeping its enabled state. A failing load restores the
// previous copy.
func (m *Manager) Update(ctx context.Context, name string) error {
	dir, rec, err := m.installed(name)
	if err != nil {
		return err
	}
	var stage string
	var fresh *Install
	if rec.Marketplace != "" {
		// Follow the marketplace: its entry may now point elsewhere.
		stage, fresh, err = m.fetchEntry(ctx, rec.Entry, rec.Marketplace)
	} else {
		stage, fresh, err = m.fetch(ctx, InstallOptions{Source: rec.Source, Path: rec.Path, Ref: rec.Ref})
	}
	if err != nil {
		return fmt.Errorf("update plugin %s: %w", name, err)
	}
	defer os.RemoveAll(stage) //nolint:errcheck // best-effort removal of the staging directory
	got := fresh.Entry
	if rec.Marketplace == "" {
		mf, err := manifestOf(stage)
		if err != nil {
			return fmt.Errorf("update plugin %s: %w", name, err)
		}
		got = mf.Name
	}
	if got != name {
		return fmt.Errorf("update plugin %s: the source now names the plugin %q", name, got)
	}
	fresh.Enabled, fresh.Components = rec.Enabled, rec.Components
	if err := writeInstall(stage, fresh); err != nil {
		return err
	}
	trash, err := os.MkdirTemp(m.Dir, ".update-")
	if err != nil {
		return fmt.Errorf("update plugin %s: %w", name, err)
	}
	defer os.RemoveAll(trash) //nolint:errcheck // best-effort removal of the replaced copy
	old := filepath.Join(trash, name)
	if err := os.Rename(dir, old); err != nil {
		return fmt.Errorf("update plugin %s: %w", name, err)
	}
	if err := os.Rename(stage, dir); err != nil {
		return errors.Join(fmt.Errorf("update plugin %s: %w", name, err), os.Rename(old, dir))
	}
	if err := m.check(); err != nil {
		rerr := os.RemoveAll(dir)
		if rerr == nil {
			rerr = os.Rename(old, dir)
		}
		if rerr != nil {
			return errors.Join(err, rerr)
		}
		return fmt.Errorf(
			"the configuration does not load with the updated plugin %s, so the previous version was restored: %w",
			name, err)
	}
	return nil
}

// Installed lists the names of the plugins installed in m.Dir.
func (m *Manager) Installed() ([]string, error) {
	des, err := os.ReadDir(m.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list plugins: %w", err)
	}
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".") {
			continue
		}
		if _, err := os.Stat(filepath.Join(m.Dir, de.Name(), InstallFile)); err == nil {
			out = append(out, de.Name())
		}
	}
	return out, nil
}

func (m *Manager) installed(name string) (string, *Install, error) {
	if err := CheckName(name); err != nil {
		return "", nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	dir := filepath.Join(m.Dir, name)
	if _, err := os.Lstat(dir); err != nil {
		return "", nil, fmt.Errorf("plugin %s is not installed in %s", name, m.Dir)
	}
	rec, err := readInstall(os.DirFS(m.Dir), name)
	if err != nil {
		return "", nil, err
	}
	if rec == nil {
		return "", nil, fmt.Errorf("plugin %s in %s was not installed with aerie plugin install (it has no %s); "+
			"change or remove its directory yourself", name, dir, InstallFile)
	}
	return dir, rec, nil
}

func subPath(p string) (string, error) {
	if p == "" || p == "." {
		return "", nil
	}
	c, err := cleanRel(filepath.ToSlash(p))
	if err != nil {
		return "", fmt.Errorf("--path: %w", err)
	}
	return c, nil
}

// manifestOf reads the manifest of a staged plugin, by precedence.
func manifestOf(dir string) (*Manifest, error) {
	for _, mf := range ManifestFiles {
		file := filepath.Join(dir, filepath.FromSlash(mf.Path))
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return ParseManifest(mf.Format, file, data)
	}
	return nil, errNoManifest
}

// errNoManifest is manifestOf's error for a source without a manifest.
var errNoManifest = errors.New(noManifest + " in the source")

// fetch copies the plugin at sub of a source into a new staging directory
// inside m.Dir (a dot name, so discovery ignores it, and on the same file
// system, so the final rename is atomic).
func (m *Manager) fetch(ctx context.Context, f InstallOptions) (string, *Install, error) {
	if f.Source == "" {
		return "", nil, errors.New("install plugin: the source is empty")
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("install plugin: %w", err)
	}
	rec := &Install{Source: f.Source, Ref: f.Ref, Path: f.Path, InstalledAt: m.now()}
	stage, err := os.MkdirTemp(m.Dir, ".stage-")
	if err != nil {
		return "", nil, fmt.Errorf("install plugin: %w", err)
	}
	dest := filepath.Join(stage, "plugin")
	fail := func(err error) (string, *Install, error) {
		_ = os.RemoveAll(stage)
		return "", nil, err
	}
	if st, err := os.Stat(f.Source); err == nil && st.IsDir() && f.Ref == "" && f.SHA == "" {
		abs, err := filepath.Abs(f.Source)
		if err != nil {
			return fail(fmt.Errorf("install plugin: %w", err))
		}
		rec.Source = abs
		if err := copyTree(filepath.Join(abs, filepath.FromSlash(f.Path)), dest); err != nil {
			return fail(fmt.Errorf("install plugin from %s: %w", abs, err))
		}
	} else {
		clone := filepath.Join(stage, "clone")
		commit, err := m.clone(ctx, f.Source, f.Ref, f.SHA, clone)
		if err != nil {
			return fail(fmt.Errorf("install plugin: %w", err))
		}
		rec.Commit = commit
		if err := copyTree(filepath.Join(clone, filepath.FromSlash(f.Path)), dest); err != nil {
			return fail(fmt.Errorf("install plugin from %s: %w", f.Source, err))
		}
	}
	// Move the plugin out of the staging directory's scratch space so
	// that the caller gets one directory to rename into place.
	final, err := os.MkdirTemp(m.Dir, ".stage-")
	if err != nil {
		return fail(fmt.Errorf("install plugin: %w", err))
	}
	_ = os.Remove(final)
	if err := os.Rename(dest, final); err != nil {
		return fail(fmt.Errorf("install plugin: %w", err))
	}
	_ = os.RemoveAll(stage)
	return final, rec, nil
}

// clone clones url into dir at ref (the default branch when empty), checks
// out sha when given, and returns the commit checked out. Without a sha the
// clone is shallow.
func (m *Manager) clone(ctx context.Context, url, ref, sha, dir string) (string, error) {
	args := []string{"clone", "--quiet"}
	if sha == "" {
		args = append(args, "--depth", "1")
	} else {
		args = append(args, "--no-checkout")
	}
	if ref != "" {
		args = append(args, "--branch", ref)
	}
	args = append(args, "--", url, dir)
	if out, err := m.git(ctx, "", args...); err != nil {
		return "", fmt.Errorf("git clone %s: %w: %s", url, err, out)
	}
	if sha != "" {
		if out, err := m.git(ctx, dir, "checkout", "--quiet", "--detach", sha, "--"); err != nil {
			return "", fmt.Errorf("git checkout %s in %s: %w: %s", sha, url, err, out)
		}
	}
	commit, err := m.git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("git rev-parse: %w: %s", err, commit)
	}
	return strings.TrimSpace(commit), nil
}

func (m *Manager) git(ctx context.Context, dir string, args ...string) (string, error) {
	bin := m.Git
	if bin == "" {
		bin = "git"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	// No prompt for credentials: a command line must never hang.
	env := m.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clip(env), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// copyTree copies the directory src to dst, which must not exist: regular
// files with their permission bits, directories, and symbolic links as
// links. .git and the source's own install record are left out.
func copyTree(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", src)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.Name() == ".git" || (rel == InstallFile) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			return copyFile(p, target, info.Mode().Perm())
		default:
			return nil // sockets, FIFOs and devices are not part of a plugin
		}
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close() //nolint:errcheck // read-only
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
