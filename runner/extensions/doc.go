// Package extensions loads the extension artifacts of the layers that
// shape the agent itself — custom tools, the system prompt, project
// instructions, tool descriptions, toolsets, personas — and reports every
// one it found, used or skipped, with the reason. The layers, how they are
// read, their trust pins and the report's vocabulary are runner/layer's;
// Load takes a layer.Source and works on any list of layers.
//
// # Resolution
//
//	tools/*.toml            the first valid and trusted manifest with a given name wins
//	SYSTEM.md               AERIE_SYSTEM_PROMPT_FILE, then the nearest file; an
//	                        unreadable nearest file gives the persona prompt, never a
//	                        farther file
//	APPEND_SYSTEM.md        every readable file, nearest layer first
//	AGENTS.md / CLAUDE.md   each directory from the workspace root down to the working
//	                        directory: AGENTS.md, or CLAUDE.md where AGENTS.md is absent;
//	                        32 KiB in all, the tail cut and "[truncated]" added
//	tool-descriptions.toml  AERIE_TOOL_DESCRIPTIONS_FILE, then the nearest file; an
//	                        invalid nearest file gives the bundled descriptions
//	toolsets.toml           the nearest file; an invalid one is skipped without trying
//	                        a farther one
//	trust.toml              the union of the pinnable layers' files, and the
//	                        session's own pins (Options.Pins); see runner/layer
//	personas/<name>.toml    the first valid file (LoadPersona); its prompt is the
//	                        persona prompt above, its toolset the default toolset
//
// AGENTS.md and CLAUDE.md are read through the workspace's layer.Dir, so
// that a symbolic link in the repository never makes the runner read a
// file outside it.
//
// # Custom tools
//
// A manifest in a layer's tools/ directory exposes a program as a tool:
//
//	name = "word_count"                  # 1-64 of a-z, 0-9, _; not a built-in's name
//	description = "Counts words."        # required
//	command = ["./count.sh", "--json"]   # program and fixed arguments
//	timeout_secs = 30                    # default 300, at most 3600
//	sandbox = true                       # recorded, not enforced
//
//	[parameters.text]
//	type = "string"                      # a JSON schema type
//	description = "Text to count."
//	required = true
//
// The program is always a path: a relative one starts at the manifest's
// directory (a bare "count.sh" too, so that a pin always covers the script
// that runs), and it runs in its own directory. To run an interpreter,
// give the script a #! line. The call's arguments go to its standard input
// as one line of JSON; its standard output is the result. Each output
// stream keeps its first and last 512 KiB, with the number of bytes
// dropped between them. A timeout or a canceled call terminates the
// program's whole process group, through the executor. The environment is
// the executor's allow-listed, secret-free one unless the runner gives
// another: the model API key and the database DSN never reach a custom
// tool. No failure (spawn, wait, timeout, non-zero exit) is retried.
//
// A project tool runs only when a trust pin matches it (runner/layer), and
// its trust is checked again before every run. A tools/ directory is listed
// up to layer.MaxDirEntries entries and loads at most MaxManifests
// manifests, in name order; AGENTS.md files are read no further than the
// instruction budget.
//
// # The report
//
// Load returns a Set: the active tools, the composed prompt, the
// description overrides, the toolsets, the pins, and a layer.Report
// listing the layers that cannot be read, the trust files and every
// artifact of this package, with its layer, path, status, the copies it
// shadows, its trust, provenance, digest and activation boundary, and a
// sanitized reason. Problems in layers the submitter controls are listed
// by Report.Problems: a runner should not start with them. Problems in the
// workspace are only reported.
package extensions
