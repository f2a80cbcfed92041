// Package layer is the foundation every loader of extension artifacts
// stands on: the layers and how they are found, the directories they are
// read through, the listing a load shares, trust pins, provenance,
// digests, and the report's vocabulary — one Status, one Artifact (the
// report's entry) and one Problem for every loader (custom tools and
// prompts, hooks, skills, plugins, MCP servers).
//
// # Layers
//
// A Layer is one directory of artifacts. Locally (Discover) the layers are
// the project .aerie/ directories — and .osprey/, an alias read at the same
// level, after .aerie/ (ProjectDirs) — from the working directory up to the
// workspace root, nearest first, never beyond it; then $AERIE_HOME; then the
// artifacts bundled into the binary. In a pod the layers of the
// AgentSession's spec, the namespace and the platform come between the
// project and $AERIE_HOME, and the controller hands the runner the list.
// Every loader works on any list.
//
// Project layers, AGENTS.md and CLAUDE.md are read through a Dir at the
// workspace, so that a symbolic link in the repository never makes the
// runner read a file outside it; other layers through a Dir at the layer.
// A Dir resolves each path beneath its directory in one system call
// (openat2 with RESOLVE_BENEATH) and leaves what that refuses to an
// os.Root, which decides; a path that leads out fails with ErrEscapes
// either way. A Source opened (View) holds these Dirs for a load; a
// Listing of each layer's top directory, made once, spares the loaders
// looking for names a layer does not hold. The bundled layer is read in
// place from the binary (embed.FS) and never written to disk, so it holds
// text artifacts only: an executable artifact there would have no
// directory to run from, and is refused.
//
// A file is "there" when it exists at all, as a dangling link, a directory
// or a FIFO included: such a file cannot be read, and counts as a read
// failure rather than an absence.
//
// # Digests
//
// ContentDigest digests what a layer holds now — its files' paths,
// executable bits and bytes, through the same Dir the loaders read with —
// in the encoding the controller uses for ConfigMap layers, so that the
// layers a session used can be recorded and compared with what the
// controller rendered. Digest is the digest of one artifact's bytes.
//
// # Trust pins
//
// Executables of the workspace (custom tools, hooks, MCP servers) run only
// when pinned. Pins are read only from layers the session's submitter
// controls (Layer.Pinnable: $AERIE_HOME locally; spec, namespace and
// platform layers in a pod), never from the workspace; in a pod, only from
// the kinds of layers the AgentSession's spec.trust.sources names (the
// others have Layer.IgnorePins), and from the documents of
// spec.trust.pinsFrom, which the runner passes besides them (ReadPins).
// The file is trust.toml:
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
// hashed up to MaxExecutableBytes, and a directory of a layer is listed up
// to MaxDirEntries entries. Files are opened non-blocking, so a FIFO
// cannot hang discovery, and anything but a regular file is refused.
//
// # The report
//
// Every loader reports what it found as Artifacts: each with its layer,
// path, Status (active, inactive, shadowed, skipped, pending_reload), the
// copies it shadows, its trust, provenance, digest and activation
// boundary, and a reason passed through SanitizeReason, since reasons
// quote files a repository controls. An inactive artifact is valid but not
// used: an executable without trust (its Trust says untrusted or
// modified, and its Pin what would trust it), or one disabled. What a
// loader could not use, or a part of a file it could not, is a Problem.
// Problems in layers the submitter controls are errors (Report.Problems
// for the artifacts that say so): a runner should not start with them.
// Problems in the workspace are only reported.
package layer
