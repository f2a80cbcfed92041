package plugins

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/aerie-run/aerie/runner/atomicfile"
)

// MarketsDir is the directory of $AERIE_HOME that holds the marketplaces
// added with aerie plugin marketplace add: <name>.yaml records, and the
// clones of git marketplaces in <name>/.
const MarketsDir = "marketplaces"

// MarketRecord is what aerie remembers of an added marketplace.
type MarketRecord struct {
	Name string `yaml:"name" json:"name"`
	// Source is the directory or git URL added (a GitHub OWNER/REPO is
	// recorded as its URL).
	Source string `yaml:"source" json:"source"`
	// Ref is the branch or tag asked for (git only).
	Ref string `yaml:"ref,omitempty" json:"ref,omitempty"`
	// Commit is the commit of the clone (git only).
	Commit string `yaml:"commit,omitempty" json:"commit,omitempty"`
	// Dir is the marketplace's root: the source directory itself, or the
	// clone in $AERIE_HOME/marketplaces/<name>.
	Dir string `yaml:"dir" json:"dir"`
	// Format is the catalog's format, claude or codex.
	Format    Format    `yaml:"format" json:"format"`
	AddedAt   time.Time `yaml:"added_at" json:"added_at"`
	UpdatedAt time.Time `yaml:"updated_at" json:"updated_at"`
}

// Git reports whether the marketplace was cloned.
func (r *MarketRecord) Git() bool { return r.Commit != "" }

// ReadMarketplace reads the catalog at the root of dir, the first of
// MarketplaceFiles, and returns it with the file read.
func ReadMarketplace(dir string) (*Marketplace, string, error) {
	for _, mf := range MarketplaceFiles {
		file := filepath.Join(dir, filepath.FromSlash(mf.Path))
		f, err := os.Open(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, file, err
		}
		data, err := io.ReadAll(io.LimitReader(f, MaxMarketplaceSize+1))
		_ = f.Close()
		if err != nil {
			return nil, file, err
		}
		m, err := ParseMarketplace(mf.Format, file, data)
		return m, file, err
	}
	return nil, "", fmt.Errorf("%s holds no marketplace catalog (%s or %s)", dir,
		MarketplaceFiles[0].Path, MarketplaceFiles[1].Path)
}

func (m *Manager) marketFile(name string) string {
	return filepath.Join(m.MarketDir, name+".yaml")
}

// AddMarketplace adds the marketplace at source — a directory, a git URL or
// a GitHub OWNER/REPO — under name (the catalog's own name when empty). A
// directory is used where it is; a git source, or any source with a ref,
// is cloned into m.MarketDir.
func (m *Manager) AddMarketplace(ctx context.Context, source, ref, name string) (*MarketRecord, *Marketplace, error) {
	if m.MarketDir == "" {
		return nil, nil, errors.New("add marketplace: no marketplaces directory")
	}
	if err := os.MkdirAll(m.MarketDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("add marketplace: %w", err)
	}
	if err := checkRef(ref); err != nil {
		return nil, nil, fmt.Errorf("add marketplace: --ref: %w", err)
	}
	now := m.now()
	rec := &MarketRecord{Source: source, Ref: ref, AddedAt: now, UpdatedAt: now}
	var stage string
	defer func() {
		if stage != "" {
			_ = os.RemoveAll(stage)
		}
	}()
	if st, err := os.Stat(source); err == nil && st.IsDir() && ref == "" {
		abs, err := filepath.Abs(source)
		if err != nil {
			return nil, nil, fmt.Errorf("add marketplace: %w", err)
		}
		rec.Source, rec.Dir = abs, abs
	} else {
		url, err := gitURLOf(source)
		if err != nil {
			return nil, nil, fmt.Errorf("add marketplace: %w", err)
		}
		rec.Source = url
		if stage, err = os.MkdirTemp(m.MarketDir, ".stage-"); err != nil {
			return nil, nil, fmt.Errorf("add marketplace: %w", err)
		}
		if rec.Commit, err = m.clone(ctx, url, ref, "", filepath.Join(stage, "clone")); err != nil {
			return nil, nil, fmt.Errorf("add marketplace: %w", err)
		}
		rec.Dir = filepath.Join(stage, "clone")
	}
	mk, _, err := ReadMarketplace(rec.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("add marketplace %s: %w", source, err)
	}
	rec.Format = mk.Format
	rec.Name = name
	if name == "" {
		rec.Name = mk.Name
	}
	if err := CheckName(rec.Name); err != nil {
		return nil, nil, fmt.Errorf("add marketplace: --name: %w", err)
	}
	if _, err := os.Lstat(m.marketFile(rec.Name)); err == nil {
		return nil, nil, fmt.Errorf("add marketplace: %s is already added; remove it first, or give --name another name",
			rec.Name)
	}
	if stage != "" {
		dest := filepath.Join(m.MarketDir, rec.Name)
		_ = os.RemoveAll(dest) // a clone left behind by an interrupted remove
		if err := os.Rename(rec.Dir, dest); err != nil {
			return nil, nil, fmt.Errorf("add marketplace: %w", err)
		}
		rec.Dir = dest
	}
	if err := m.writeMarket(rec); err != nil {
		return nil, nil, err
	}
	return rec, mk, nil
}

// gitURLOf is the clone URL of a marketplace source that is not a
// directory.
func gitURLOf(source string) (string, error) {
	if IsGitHubShorthand(source) {
		return GitHubURL(source), nil
	}
	if err := CheckGitURL(source); err != nil {
		return "", fmt.Errorf("%s is neither a directory nor a git URL: %w", source, err)
	}
	return source, nil
}

func (m *Manager) writeMarket(rec *MarketRecord) error {
	data, err := yaml.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode marketplace record: %w", err)
	}
	data = append([]byte("# Written by aerie plugin marketplace; do not edit.\n"), data...)
	if err := atomicfile.Write(m.marketFile(rec.Name), data, 0o600); err != nil {
		return fmt.Errorf("write marketplace record: %w", err)
	}
	return nil
}

// MarketRecord reads the record of the marketplace name.
func (m *Manager) MarketRecord(name string) (*MarketRecord, error) {
	if err := CheckName(name); err != nil {
		return nil, fmt.Errorf("marketplace %q: %w", name, err)
	}
	data, err := os.ReadFile(m.marketFile(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("marketplace %s is not added; add it with aerie plugin marketplace add SOURCE", name)
	}
	if err != nil {
		return nil, fmt.Errorf("marketplace %s: %w", name, err)
	}
	var rec MarketRecord
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("read %s: %w; remove the marketplace and add it again", m.marketFile(name), err)
	}
	if rec.Name != name {
		return nil, fmt.Errorf("read %s: it names the marketplace %q; remove it and add the marketplace again",
			m.marketFile(name), rec.Name)
	}
	return &rec, nil
}

// Marketplace reads the record and the catalog of the marketplace name.
func (m *Manager) Marketplace(name string) (*MarketRecord, *Marketplace, error) {
	rec, err := m.MarketRecord(name)
	if err != nil {
		return nil, nil, err
	}
	mk, _, err := ReadMarketplace(rec.Dir)
	if err != nil {
		return rec, nil, fmt.Errorf("marketplace %s: %w", name, err)
	}
	return rec, mk, nil
}

// MarketNames lists the added marketplaces, by name.
func (m *Manager) MarketNames() ([]string, error) {
	des, err := os.ReadDir(m.MarketDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list marketplaces: %w", err)
	}
	var out []string
	for _, de := range des {
		n, ok := strings.CutSuffix(de.Name(), ".yaml")
		if ok && de.Type().IsRegular() && CheckName(n) == nil {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// UpdateMarketplace fetches a git marketplace again (a directory is read
// where it is, so only its catalog is checked) and returns its new record.
// A catalog that no longer parses keeps the previous clone.
func (m *Manager) UpdateMarketplace(ctx context.Context, name string) (*MarketRecord, error) {
	rec, err := m.MarketRecord(name)
	if err != nil {
		return nil, err
	}
	if !rec.Git() {
		if _, _, err := ReadMarketplace(rec.Dir); err != nil {
			return nil, fmt.Errorf("update marketplace %s: %w", name, err)
		}
		rec.UpdatedAt = m.now()
		return rec, m.writeMarket(rec)
	}
	stage, err := os.MkdirTemp(m.MarketDir, ".stage-")
	if err != nil {
		return nil, fmt.Errorf("update marketplace %s: %w", name, err)
	}
	defer os.RemoveAll(stage) //nolint:errcheck // best-effort removal of the staging directory
	clone := filepath.Join(stage, "clone")
	commit, err := m.clone(ctx, rec.Source, rec.Ref, "", clone)
	if err != nil {
		return nil, fmt.Errorf("update marketplace %s: %w", name, err)
	}
	if _, _, err := ReadMarketplace(clone); err != nil {
		return nil, fmt.Errorf("update marketplace %s: the new catalog does not parse, so the previous one is kept: %w",
			name, err)
	}
	old := filepath.Join(stage, "old")
	if err := os.Rename(rec.Dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("update marketplace %s: %w", name, err)
	}
	if err := os.Rename(clone, rec.Dir); err != nil {
		return nil, errors.Join(fmt.Errorf("update marketplace %s: %w", name, err), os.Rename(old, rec.Dir))
	}
	rec.Commit, rec.UpdatedAt = commit, m.now()
	return rec, m.writeMarket(rec)
}

// RemoveMarketplace forgets a marketplace and removes its clone. Plugins
// installed from it stay installed; aerie plugin update fails for them
// until it is added again.
func (m *Manager) RemoveMarketplace(name string) error {
	rec, err := m.MarketRecord(name)
	if err != nil {
		return err
	}
	if err := os.Remove(m.marketFile(name)); err != nil {
		return fmt.Errorf("remove marketplace %s: %w", name, err)
	}
	if rec.Git() && filepath.Dir(rec.Dir) == filepath.Clean(m.MarketDir) {
		if err := os.RemoveAll(rec.Dir); err != nil {
			return fmt.Errorf("remove marketplace %s: its clone: %w", name, err)
		}
	}
	return nil
}

// InstallFrom installs the entry of the marketplace market and returns the
// plugin's name. comps, when not nil, are recorded as the components to
// load (see InstallOptions.Components).
func (m *Manager) InstallFrom(ctx context.Context, entry, market string, comps Components) (string, error) {
	stage, rec, err := m.fetchEntry(ctx, entry, market)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage) //nolint:errcheck // best-effort removal of the staging directory
	rec.Components = comps.Strings()
	return m.place(stage, rec, rec.Entry)
}

// Resolve returns what installing the entry of the marketplace whose record
// is rec would fetch, or why it cannot be installed. A relative source
// must be present in the marketplace.
func Resolve(rec *MarketRecord, mk *Marketplace, name string) (*MarketEntry, InstallOptions, error) {
	e := mk.Entry(name)
	if e == nil {
		return nil, InstallOptions{}, fmt.Errorf(
			"marketplace %s has no entry %q; aerie plugin marketplace list %s shows them", rec.Name, name, rec.Name)
	}
	if e.Problem != nil {
		return e, InstallOptions{}, fmt.Errorf("entry %s of marketplace %s cannot be installed: %w",
			e.Name, rec.Name, e.Problem)
	}
	switch e.Source.Kind {
	case SourceRelative:
		dir := filepath.Join(rec.Dir, filepath.FromSlash(e.Source.Path))
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			return e, InstallOptions{}, fmt.Errorf(
				"entry %s of marketplace %s: its source ./%s is not a directory of the marketplace (%s)",
				e.Name, rec.Name, e.Source.Path, rec.Dir)
		}
		return e, InstallOptions{Source: dir}, nil
	default:
		return e, InstallOptions{Source: e.Source.URL, Path: e.Source.Path, Ref: e.Source.Ref, SHA: e.Source.SHA}, nil
	}
}

// fetchEntry stages the plugin of a marketplace entry and the install
// record that says so.
func (m *Manager) fetchEntry(ctx context.Context, entry, market string) (string, *Install, error) {
	rec, mk, err := m.Marketplace(market)
	if err != nil {
		return "", nil, fmt.Errorf("install plugin: %w", err)
	}
	e, src, err := Resolve(rec, mk, entry)
	if err != nil {
		return "", nil, fmt.Errorf("install plugin: %w", err)
	}
	stage, inst, err := m.fetch(ctx, src)
	if err != nil {
		return "", nil, err
	}
	if e.Source.Kind == SourceRelative && rec.Git() {
		inst.Commit = rec.Commit
	}
	inst.Marketplace, inst.Entry = rec.Name, e.Name
	if inst.Manifest, err = entryManifest(stage, mk.Format, e); err != nil {
		_ = os.RemoveAll(stage)
		return "", nil, fmt.Errorf("install plugin %s@%s: %w", e.Name, rec.Name, err)
	}
	return stage, inst, nil
}

// entryManifest decides what the entry adds to the staged plugin's
// manifest, Claude Code's way: without a manifest of its own the entry is
// the manifest; with one, an entry with strict: false must not declare
// skills in both places, and a strict entry's skills are added.
func entryManifest(stage string, format Format, e *MarketEntry) (*EntryManifest, error) {
	own, err := manifestOf(stage)
	if errors.Is(err, errNoManifest) {
		return &EntryManifest{Format: format, Name: e.Name, Version: e.Version, Description: e.Description,
			Skills: e.Skills}, nil
	}
	if err != nil {
		return nil, err
	}
	if own.Name != e.Name {
		return nil, fmt.Errorf("the plugin's manifest names it %q, but the marketplace entry is %q", own.Name, e.Name)
	}
	if !e.Strict && len(e.Skills) > 0 && len(own.Skills) > 1 {
		return nil, errors.New("the entry has strict: false, so it is the plugin's whole manifest, but the plugin's " +
			"own manifest lists skills too; list them in one place")
	}
	if len(e.Skills) == 0 {
		return nil, nil
	}
	return &EntryManifest{Format: format, Skills: e.Skills}, nil
}
