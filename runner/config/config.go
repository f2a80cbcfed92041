// Package config resolves aerie's home directory and reads the configuration
// files: on a laptop $AERIE_HOME/config.toml and the nearest
// .aerie/config.toml (or its .osprey/ alias) between the working directory and
// the workspace boundary (Load); in a runner pod the config.toml of each
// mounted extension layer and the same project file (LoadLayers). It also
// writes database_url into the global file without disturbing the rest of it.
//
// The files are layered, farthest first, each nearer one overriding the
// farther ones key by key: locally the global file, then the project file; in
// a pod the platform layers, the namespace layers, the spec's layers, then the
// project file. Only the global file may set database_url. The layering is
// lenient where the spec asks for it (a malformed global file is a warning
// and its values are dropped) and strict where it does not (a malformed
// project or mounted layer's file stops launch). Unknown keys are ignored, so
// files written for a newer aerie still load; other sections are added to
// Config as the features that read them arrive.
package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/plugins"
	"github.com/aerie-run/aerie/runner/pricing"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Config is the merged configuration a session runs with. Start from Defaults;
// Load applies the files on top.
type Config struct {
	// DatabaseURL is the session store: a postgres:// URL or a SQLite file
	// (see store.ParseURL). Only the global file may set it.
	DatabaseURL string

	// Model is the [model] table.
	Model Model

	// ToolResults controls how large tool outputs reach the model.
	ToolResults ToolResults

	// Plugins is the [plugins] table.
	Plugins Plugins

	// Compaction is the [compaction] table.
	Compaction Compaction

	// Subagents is the [subagents] table.
	Subagents Subagents
	// MoA is the [moa] table.
	MoA MoA
	// Prices are the [prices."model"] tables: prices in US dollars per
	// million tokens (input, output, cache_read, cache_write) that replace
	// or add to the bundled ones (see package pricing), a nearer file's
	// model by model.
	Prices pricing.Table
}

// Model is the [model] table: the bounds on the model's streamed answers,
// which the model's API calls of the session (and of its subagents)
// apply.
type Model struct {
	// StreamIdleTimeout fails an attempt of a model call whose streamed
	// answer sends nothing for this long (stream_idle_timeout_secs). An
	// attempt that stalls before its answer began is retried like a
	// connection error; one that stalls later fails the call.
	StreamIdleTimeout time.Duration
	// MaxAnswerBytes caps one answer of the model, its text, reasoning and
	// tool call arguments together (max_answer_bytes): a larger answer
	// fails the call, and it is not retried.
	MaxAnswerBytes int
}

// Bound returns pc with the table's bounds, for the provider of a
// session's model calls.
func (m Model) Bound(pc provider.Config) provider.Config {
	pc.StreamIdleTimeout, pc.MaxAnswerBytes = m.StreamIdleTimeout, m.MaxAnswerBytes
	return pc
}

// maxStreamIdleTimeout bounds stream_idle_timeout_secs: a day.
const maxStreamIdleTimeout = 24 * time.Hour

func (m Model) validate() error {
	if m.StreamIdleTimeout <= 0 || m.StreamIdleTimeout > maxStreamIdleTimeout {
		return &keyError{key: "model.stream_idle_timeout_secs", err: fmt.Errorf("%d is out of range; use 1 to %d seconds",
			int64(m.StreamIdleTimeout/time.Second), int64(maxStreamIdleTimeout/time.Second))}
	}
	if m.MaxAnswerBytes <= 0 || m.MaxAnswerBytes > maxLimit {
		return &keyError{
			key: "model.max_answer_bytes", err: fmt.Errorf("%d is out of range; use 1 to %d", m.MaxAnswerBytes, maxLimit),
		}
	}
	return nil
}

// MoA is the [moa] table: the models of the mixture_of_agents tool, which
// is offered only when ReferenceModels names at least one.
type MoA struct {
	// ReferenceModels are the models each question goes to
	// (reference_models = ["anthropic:claude-opus-4-1", "openai:gpt-5"]).
	ReferenceModels []ModelRef
	// AggregatorModel writes the synthesis of their answers
	// (aggregator_model); zero is the session's own model.
	AggregatorModel ModelRef
}

// Models are the references and the aggregator as a session names models
// (an empty Provider is the session's; an empty aggregator, its model).
func (m MoA) Models() (references []transcript.Settings, aggregator transcript.Settings) {
	for _, r := range m.ReferenceModels {
		references = append(references, r.settings())
	}
	return references, m.AggregatorModel.settings()
}

func (m ModelRef) settings() transcript.Settings {
	return transcript.Settings{Provider: m.Provider, Model: m.Model}
}

// ModelRef names a model as the configuration does: "provider:model", or a
// bare "model" of the session's provider (Provider empty).
type ModelRef struct {
	Provider string
	Model    string
}

// String is the reference as a file writes it.
func (m ModelRef) String() string {
	if m.Provider == "" {
		return m.Model
	}
	return m.Provider + ":" + m.Model
}

// knownProviders are the providers a ModelRef may name.
var knownProviders = []string{
	provider.NameAnthropic, provider.NameOpenAI, provider.NameOpenAICompatible, provider.NameScripted,
}

// ParseModelRef reads "provider:model" or a bare "model". The text before
// the first colon must be a known provider, so that a model name with a
// colon in it is written after its provider ("openai-compatible:llama3:8b").
func ParseModelRef(s string) (ModelRef, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return ModelRef{}, errors.New(`empty: name a model as "provider:model" or "model"`)
	}
	p, m, ok := strings.Cut(s, ":")
	if !ok {
		return ModelRef{Model: s}, nil
	}
	if !slices.Contains(knownProviders, p) {
		return ModelRef{}, fmt.Errorf("%q: unknown provider %q; want one of %s (as \"provider:model\")",
			s, p, strings.Join(knownProviders, ", "))
	}
	if strings.TrimSpace(m) == "" {
		return ModelRef{}, fmt.Errorf("%q: no model after the provider", s)
	}
	return ModelRef{Provider: p, Model: strings.TrimSpace(m)}, nil
}

// Subagents is the [subagents] table: the limits of a session tree's
// spawn_agent calls. A call past one is an error for the model.
type Subagents struct {
	// MaxConcurrent is how many subagents of a tree may run at once
	// (max_concurrent).
	MaxConcurrent int
	// MaxDepth is how deep the tree may grow (max_depth): the session's
	// children are at depth 1; 0 offers no spawn_agent.
	MaxDepth int
	// MaxTotal is how many subagents a tree may spawn in all (max_total).
	MaxTotal int
}

// The [subagents] defaults, the spec's.
const (
	DefaultSubagentsMaxConcurrent = 8
	DefaultSubagentsMaxDepth      = 3
	DefaultSubagentsMaxTotal      = 64
)

// Compaction is the [compaction] table.
type Compaction struct {
	// Model names the model, of the session's provider, that writes the
	// summaries of conversation compaction (model); empty is the session's
	// own model. A cheaper model can summarize for an expensive one.
	Model string
}

// Plugins is the [plugins] table.
type Plugins struct {
	// Disabled names plugins that are not used, whatever layer holds them
	// (disabled = ["name", ...]). A nearer file replaces a farther one's
	// list, except in a runner pod, where the workspace's project file can
	// only add to the list the submitter's layers give: a repository cannot
	// turn on a plugin the cluster turned off.
	Disabled []string
	// Components are the components loaded from a Claude or Codex plugin
	// (components = ["skills", "agents", "commands", "hooks", "mcp"] or
	// ["all"]); nil is the default, skills only. A plugin installed with
	// aerie plugin install --components uses its own list. A nearer file
	// replaces a farther one's list.
	Components plugins.Components
}

// ToolResults is the [tool_results] table.
type ToolResults struct {
	// CompressContext turns on semantic compression of large tool outputs
	// (compress_context; the --compress-context flag overrides it).
	CompressContext bool

	// MaxBytes caps a tool result in bytes (max_bytes). Zero turns the byte
	// cap off; with MaxLines also zero, results are not capped at all.
	MaxBytes int

	// MaxLines caps a tool result in lines (max_lines). Zero, the default,
	// disables the line trigger.
	MaxLines int

	// HeadBytes and TailBytes are how much of a capped result's beginning and
	// end is kept (head_bytes, tail_bytes).
	HeadBytes int
	TailBytes int
}

// Default values the spec fixes.
const (
	DefaultToolResultMaxBytes  = 32768
	DefaultToolResultHeadBytes = 12288
	DefaultToolResultTailBytes = 12288

	// maxLimit bounds every size so that sums of them cannot overflow and a
	// typo like an extra zero is caught rather than obeyed.
	maxLimit = 1 << 30
)

// Defaults returns the configuration used when no file sets anything: SQLite
// at home/sessions.db and the spec's tool-result limits.
func Defaults(home string) Config {
	return Config{
		DatabaseURL: store.SQLiteURL(filepath.Join(home, "sessions.db")),
		Model: Model{
			StreamIdleTimeout: provider.DefaultStreamIdleTimeout,
			MaxAnswerBytes:    provider.DefaultMaxAnswerBytes,
		},
		ToolResults: ToolResults{
			MaxBytes:  DefaultToolResultMaxBytes,
			HeadBytes: DefaultToolResultHeadBytes,
			TailBytes: DefaultToolResultTailBytes,
		},
		Subagents: Subagents{
			MaxConcurrent: DefaultSubagentsMaxConcurrent,
			MaxDepth:      DefaultSubagentsMaxDepth,
			MaxTotal:      DefaultSubagentsMaxTotal,
		},
	}
}

// keyDatabaseURL is the key of the session store's URL, which only the global
// file may set.
const keyDatabaseURL = "database_url"

// Validate reports the first value that cannot be used. The error names the
// key in file syntax (tool_results.max_bytes) so it can be placed in a file.
// An empty DatabaseURL is not checked: a runner pod's configuration names no
// store (the pod's comes from its environment).
func (c Config) Validate() error {
	if c.DatabaseURL != "" {
		if _, err := store.ParseURL(c.DatabaseURL); err != nil {
			return &keyError{key: keyDatabaseURL, err: err}
		}
	}
	if err := c.Model.validate(); err != nil {
		return err
	}
	if err := c.ToolResults.validate(); err != nil {
		return err
	}
	return c.Subagents.validate()
}

func (s Subagents) validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{
		{"subagents.max_concurrent", s.MaxConcurrent},
		{"subagents.max_depth", s.MaxDepth},
		{"subagents.max_total", s.MaxTotal},
	} {
		if f.v < 0 || f.v > maxLimit {
			return &keyError{key: f.key, err: fmt.Errorf("%d is out of range; use 0 to %d", f.v, maxLimit)}
		}
	}
	return nil
}

func (t ToolResults) validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{
		{"tool_results.max_bytes", t.MaxBytes},
		{"tool_results.max_lines", t.MaxLines},
		{"tool_results.head_bytes", t.HeadBytes},
		{"tool_results.tail_bytes", t.TailBytes},
	} {
		if f.v < 0 || f.v > maxLimit {
			return &keyError{key: f.key, err: fmt.Errorf("%d is out of range; use 0 to %d", f.v, maxLimit)}
		}
	}
	// A kept head and tail larger than the cap would make a capped result
	// bigger than the cap it is meant to respect.
	if t.MaxBytes > 0 && t.HeadBytes+t.TailBytes > t.MaxBytes {
		return &keyError{
			key: "tool_results", // three keys, possibly from two files: point at the table
			err: fmt.Errorf("head_bytes + tail_bytes (%d) exceed max_bytes (%d); lower them or raise max_bytes",
				t.HeadBytes+t.TailBytes, t.MaxBytes),
		}
	}
	return nil
}

// keyError is a bad value at a dotted key, before it is placed in a file.
type keyError struct {
	key string
	// path is the key's parts when one holds a dot (a model name).
	path []string
	err  error
}

func (e *keyError) Error() string { return e.key + ": " + e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// ErrDatabaseURLInProject is returned (inside a *FileError) when a project
// file sets database_url: the spec does not let a project replace the
// database connection.
var ErrDatabaseURLInProject = errors.New("a project config cannot replace the database connection")

// ErrDatabaseURLInLayer is returned (inside a *FileError) when a mounted
// layer's file sets database_url: a runner pod's session store is the one
// its environment names (the controller's --database-secret).
var ErrDatabaseURLInLayer = errors.New("a layer config cannot replace the database connection")

// FileError is a problem in one configuration file. Line and Column are
// 1-based and zero when the problem has no single place (an unreadable file).
type FileError struct {
	// Layer names the extension layer that holds the file ("namespace
	// layer team-defaults (configmap/team-defaults)"), when it is a mounted
	// layer's: its path in the pod says little.
	Layer string
	// Path is the file.
	Path string
	// Line and Column locate the problem in Path.
	Line, Column int
	// Key is the dotted key at fault, when there is one.
	Key string
	// Err is what is wrong.
	Err error
	// Fix tells the reader what to do, when Err alone does not.
	Fix string
}

func (e *FileError) Error() string {
	s := e.Path
	if e.Layer != "" {
		s = e.Layer + ": " + s
	}
	if e.Line > 0 {
		s += fmt.Sprintf(":%d:%d", e.Line, e.Column)
	}
	if e.Key != "" {
		s += ": " + e.Key
	}
	s += ": " + e.Err.Error()
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

func (e *FileError) Unwrap() error { return e.Err }
