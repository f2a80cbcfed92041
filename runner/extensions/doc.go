// Package extensions discovers what is layered around the agent — custom
// tools, prompts, tool descriptions, toolsets, trust pins — from an ordered
// list of layer directories, and reports every artifact it found, used or
// skipped, with the reason.
//
// # Layers
//
// A Layer is one directory of artifacts. Locally (Discover) the layers are
// the project .aerie/ directories — and .osprey/, an alias read at the same
// level, after .aerie/ — from the working directory up to the workspace
// root, nearest first, never beyond it; then $AERIE_HOME; then the
// artifacts bundled into the binary. In a pod the layers of the
// AgentSession's spec, the namespace and the platform come between the
// project and $AERIE_HOME, and the controller hands the runner the list.
// Every loader takes a Source (the layers plus the workspace) and works on
// any list; hooks, skills, plugins and MCP servers take the same list.
//
// Project layers, AGENTS.md and CLAUDE.md are read through a Dir at the
// workspace, so that a symbolic link in the repository never makes the
// runner read a file outside it; other layers through a Dir at the layer.
// A Dir resolves each path beneath its directory in one system call
// (openat2 with RESOLVE_BENEATH) and leaves what that refuses to an
// os.Root, which decides; hooks and skills read their layers through Dirs
// too. The bundled layer is read in place from the binary (embed.FS) and
// never written to disk, so it holds text artifacts only: an executable
// artifact there would have no directory to run from, and is refused.
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
//	                        session's own pins (Options.Pins)
//	personas/<name>.toml    the first valid file (LoadPersona); its prompt is the
//	                        persona prompt above, its toolset the default toolset
//
// A file is "there" when it exists at all, as a dangling link, a directory
// or a FIFO included: such a file cannot be read, and counts as a read
// failure rather than an absence.
//
// # Digests
//
// ContentDigest digests what a layer holds now — its files' paths,
// executable bits and bytes, through the same os.Root the loaders read
// with — in the encoding the controller uses for ConfigMap layers, so that
// the layers a session used can be recorded and compared with what the
// controller rendered.
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
// # Trust pins
//
// Custom tools (and hooks) of the workspace run only when pinned. Pins are
// read only from layers the session's submitter controls (Layer.Pinnable:
// $AERIE_HOME locally; spec, namespace and platform layers in a pod),
// never from the workspace; in a pod, only from the kinds of layers the
// AgentSession's spec.trust.sources names (the others have
// Layer.IgnorePins), and from the documents of spec.trust.pinsFrom, which
// the runner passes as Options.Pins. The file is trust.toml:
//
//	# $AERIE_HOME/trust.toml
//	[[pin]]
//	path = ".aerie/tools/word_count.toml"   # the manifest, from the workspace root
//	sha256 = "9f2c…"                        # 64 hex digits
//
//	[[pin]]
//	path = "$AERIE_HOME/tools/notes.toml"   # an agent-authored home artifact
//	sha256 = "…"
//
// `aerie extensions` shows, for each artifact that lacks one, the pin that
// would trust it as it is now: review the manifest and its script, then
// append the pin. An artifact is trusted when a pin for its path has its
// hash, modified when pins for its path exist but none has its hash, and
// untrusted otherwise. A trust file that cannot be read or parsed makes
// every artifact that needs a pin untrusted (fail closed). Trust is
// checked again before every run of a pinned tool or hook (Guard), so a
// manifest or script changed after loading does not run: the tool call
// fails, the hook is skipped, each with the reason. The check stats the
// files the pin covers and hashes them again only when one of them
// changed.
//
// Workspace artifacts always need a pin. $AERIE_HOME artifacts need one
// only when extension_manage wrote them (agent provenance); without a
// sidecar they are a person's and are trusted; with a malformed sidecar
// they are untrusted. Spec, namespace, platform and bundled artifacts are
// trusted.
//
// The hash (ComputePin) is SHA-256 over, in order:
//
//	"aerie-trust-v1" NUL
//	"manifest" NUL <manifest path from the base> NUL <decimal length> NUL <manifest bytes>
//	for each executable with a '/' in it, in command order:
//	  inside the base:  "file" NUL <path from the base> NUL <decimal length> NUL <bytes>
//	  outside it:       "path" NUL <absolute path> NUL
//
// where the base is the workspace root for project artifacts and the layer
// directory for the others; paths are slash-separated. A bare command name
// (looked up in PATH) contributes nothing. An executable inside the base
// that is a symbolic link leading out of it cannot be pinned; name its
// target by its absolute path instead.
//
// # Provenance
//
// extension_manage (runner/extensions/userlayer) writes a JSON sidecar
// beside each artifact it manages, named after it with ProvenanceSuffix
// (tools/notes.toml.provenance.json):
//
//	{"origin": "agent", "operation_id": "…", "digest": "sha256:…", "activation_boundary": "next_turn"}
//
// The report shows it with the artifact: state agent (a well-formed sidecar
// from the agent), legacy (no sidecar) or unknown (anything else), and
// whether the artifact changed after it was written.
//
// # Bounds
//
// Every read is bounded, so that a layer of ten thousand files or a
// 100 MB file costs a skipped artifact and a reason, not a stalled runner:
// artifacts are read up to MaxArtifactBytes (256 KiB), trust.toml up to
// MaxTrustBytes, sidecars up to MaxProvenanceBytes, pinned executables are
// hashed up to MaxExecutableBytes; a tools/ directory is listed up to
// MaxDirEntries entries and loads at most MaxManifests manifests, in name
// order; AGENTS.md files are read no further than the instruction budget.
// Files are opened non-blocking, so a FIFO cannot hang discovery, and
// anything but a regular file is refused.
//
// # The report
//
// Load returns a Set: the active tools, the composed prompt, the
// description overrides, the toolsets, the pins, and a Report listing every
// artifact with its layer, path, status (active, inactive, shadowed,
// skipped, pending_reload), the copies it shadows, its trust, provenance,
// digest and activation boundary, and a sanitized reason. Problems in
// layers the submitter controls are listed by Report.Problems: a runner
// should not start with them. Problems in the workspace are only reported.
package extensions
