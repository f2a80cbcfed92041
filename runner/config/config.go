// Package config resolves aerie's home directory and reads the global and
// project configuration files: $AERIE_HOME/config.toml, and the nearest
// .aerie/config.toml (or its .osprey/ alias) between the working directory and
// the workspace boundary. It also writes database_url into the global file
// without disturbing the rest of it.
//
// The two files are layered: the project file overrides the global one, key by
// key, except for database_url, which only the global file may set. The
// layering is lenient where the spec asks for it (a malformed global file is a
// warning and its values are dropped) and strict where it does not (a
// malformed project file stops launch). Unknown keys are ignored, so files
// written for a newer aerie still load; other sections are added to Config as
// the features that read them arrive.
package config

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/aerie-run/aerie/runner/store"
)

// Config is the merged configuration a session runs with. Start from Defaults;
// Load applies the files on top.
type Config struct {
	// DatabaseURL is the session store: a postgres:// URL or a SQLite file
	// (see store.ParseURL). Only the global file may set it.
	DatabaseURL string

	// ToolResults controls how large tool outputs reach the model.
	ToolResults ToolResults

	// Plugins is the [plugins] table.
	Plugins Plugins
}

// Plugins is the [plugins] table.
type Plugins struct {
	// Disabled names plugins that are not used, whatever layer holds them
	// (disabled = ["name", ...]). A project file replaces the global list.
	Disabled []string
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
		ToolResults: ToolResults{
			MaxBytes:  DefaultToolResultMaxBytes,
			HeadBytes: DefaultToolResultHeadBytes,
			TailBytes: DefaultToolResultTailBytes,
		},
	}
}

// keyDatabaseURL is the key of the session store's URL, which only the global
// file may set.
const keyDatabaseURL = "database_url"

// Validate reports the first value that cannot be used. The error names the
// key in file syntax (tool_results.max_bytes) so it can be placed in a file.
func (c Config) Validate() error {
	if _, err := store.ParseURL(c.DatabaseURL); err != nil {
		return &keyError{key: keyDatabaseURL, err: err}
	}
	return c.ToolResults.validate()
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
	err error
}

func (e *keyError) Error() string { return e.key + ": " + e.err.Error() }
func (e *keyError) Unwrap() error { return e.err }

// ErrDatabaseURLInProject is returned (inside a *FileError) when a project
// file sets database_url: the spec does not let a project replace the
// database connection.
var ErrDatabaseURLInProject = errors.New("a project config cannot replace the database connection")

// FileError is a problem in one configuration file. Line and Column are
// 1-based and zero when the problem has no single place (an unreadable file).
type FileError struct {
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
