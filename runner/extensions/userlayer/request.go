// Package userlayer manages the agent's own extension artifacts in the
// user layer ($AERIE_HOME): the extension_manage model tool, which
// creates, replaces, deletes and lists skills, prompts, custom tools and
// hooks there.
//
// Each kind lives where discovery reads it in that layer:
//
//	skill          skills/<name>/SKILL.md   name: lowercase letters, digits, single hyphens
//	system_prompt  SYSTEM.md                no name
//	append_system  APPEND_SYSTEM.md         no name
//	tool           tools/<name>.toml        name: 1-64 of a-z, 0-9, _ (the manifest's name)
//	hooks          hooks.toml               no name (the Osprey format)
//
// A change is checked before anything is written: the content is
// complete, at most 256 KiB of UTF-8 text without null bytes or anything
// that looks like a credential, and it passes the parser a session loads
// it with (skill frontmatter, tool manifest, hooks.toml). Tools, replacement
// prompts and hooks that a nearer layer (the project's .aerie/, or a pod's
// spec, namespace and platform layers) already defines are refused: the
// nearer copy would win, and the change would silently do nothing. Append
// prompts and skills may coexist with nearer ones.
//
// A write stages the new bytes and the provenance sidecar beside the
// artifact, then renames them into place; if any step fails, the artifact
// and its sidecar are put back as they were. The sidecar records origin
// "agent", the operation's id, the digest and the activation boundary,
// "next_turn": a session's reload coordinator re-discovers its extensions
// at the next turn boundary, never in the middle of a turn.
//
// The manager never grants trust. An agent-authored tool or hook needs a
// trust pin in trust.toml, which only a person adds after reviewing it
// (aerie extensions shows the pin); until then it is inactive, although
// its bytes are on disk.
//
// Every failure has a stable category (invalid_name, invalid_content,
// name_collision, already_exists, not_found, stale_revision,
// unsupported_operation, storage_unavailable) and a message naming the
// request field at fault and the fix.
package userlayer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aerie-run/aerie/runner/extensions"
	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/skills"
)

// Kind is a kind of artifact the manager handles.
type Kind string

// The kinds, as the spec names them.
const (
	KindSkill        Kind = "skill"
	KindSystemPrompt Kind = "system_prompt"
	KindAppendSystem Kind = "append_system"
	KindTool         Kind = "tool"
	KindHooks        Kind = "hooks"
)

// Kinds are every kind, in the order list reports them.
var Kinds = []Kind{KindSkill, KindSystemPrompt, KindAppendSystem, KindTool, KindHooks}

// HooksFile is the hooks file the manager writes: the Osprey format, whose
// nearest copy wins.
const HooksFile = "hooks.toml"

// SkillFile is a skill's file in its directory.
const SkillFile = "SKILL.md"

// Operation is what a request does.
type Operation string

// The operations.
const (
	OpCreate  Operation = "create"
	OpReplace Operation = "replace"
	OpDelete  Operation = "delete"
	OpList    Operation = "list"
)

// Operations are every operation.
var Operations = []Operation{OpCreate, OpReplace, OpDelete, OpList}

// Category is a failure's stable category.
type Category string

// The failure categories, as the spec names them. Never rename one: the
// model and scripts act on them.
const (
	// InvalidName: the name is malformed for its kind.
	InvalidName Category = "invalid_name"
	// InvalidContent: the content is missing, too large, not text, holds a
	// secret, or fails the kind's parser.
	InvalidContent Category = "invalid_content"
	// NameCollision: a nearer layer defines the artifact (or a built-in
	// tool has the name), so the change would have no effect.
	NameCollision Category = "name_collision"
	// AlreadyExists: create of an artifact that is there.
	AlreadyExists Category = "already_exists"
	// NotFound: replace or delete of an artifact that is not there.
	NotFound Category = "not_found"
	// StaleRevision: expected_digest is not the artifact's digest.
	StaleRevision Category = "stale_revision"
	// UnsupportedOperation: the request is not one the manager carries
	// out: an unknown operation or kind, a field the operation does not
	// take, a symbolic link or other non-regular file in the way.
	UnsupportedOperation Category = "unsupported_operation"
	// StorageUnavailable: the user layer cannot be read or written.
	StorageUnavailable Category = "storage_unavailable"
)

// Error is a failed request. The tool result carries its category, field
// and message.
type Error struct {
	Category Category `json:"category"`
	// Field is the request field at fault (operation, kind, name, content,
	// expected_digest), empty when the failure is the storage's.
	Field string `json:"field,omitempty"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
	// Err is the underlying error, for the log.
	Err error `json:"-"`
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.Category, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", e.Category, e.Field, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

func fail(c Category, field, format string, args ...any) *Error {
	return &Error{Category: c, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Request is one extension_manage call.
type Request struct {
	Operation Operation `json:"operation"`
	// Kind is required but for list, where it narrows the listing.
	Kind Kind `json:"kind,omitempty"`
	// Name names a skill or a tool; the other kinds have none.
	Name string `json:"name,omitempty"`
	// Content is the complete artifact, for create and replace.
	Content *string `json:"content,omitempty"`
	// ExpectedDigest, on replace and delete, is the digest the artifact
	// must still have ("sha256:…", as list shows it).
	ExpectedDigest string `json:"expected_digest,omitempty"`
}

// requestFields are the JSON fields of a Request, for messages.
const requestFields = "operation, kind, name, content, expected_digest"

// MaxRequestBytes bounds a request's JSON: the largest content, escaped,
// and the other fields.
const MaxRequestBytes = 6*layer.MaxArtifactBytes + 4096

// DecodeRequest decodes and checks the arguments of an extension_manage
// call. The error is an *Error. The content itself is checked when the
// request is carried out.
func DecodeRequest(raw []byte) (Request, error) {
	if len(raw) > MaxRequestBytes {
		return Request{}, fail(
			InvalidContent, "content",
			"the request is %d bytes; an artifact is at most %d KiB",
			len(raw), layer.MaxArtifactBytes>>10,
		)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Request{}, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Request{}, fail(
			UnsupportedOperation, "",
			"the arguments have data after the JSON object; send one object with the fields %s",
			requestFields,
		)
	}
	if err := r.Validate(); err != nil {
		return Request{}, err
	}
	return r, nil
}

var unknownField = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^json: unknown field "(.*)"$`) })

// decodeError names the field a JSON error is about, with its category.
func decodeError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		c := UnsupportedOperation
		switch field {
		case "name":
			c = InvalidName
		case "content":
			c = InvalidContent
		case "expected_digest":
			c = StaleRevision
		}
		if field == "" {
			return fail(
				UnsupportedOperation, "",
				"the arguments must be a JSON object with the fields %s, not %s",
				requestFields, te.Value,
			)
		}
		return fail(c, field, "must be a string, not %s", te.Value)
	}
	if m := unknownField().FindStringSubmatch(err.Error()); m != nil {
		return fail(UnsupportedOperation, m[1], "unknown field; the fields are %s", requestFields)
	}
	return fail(
		UnsupportedOperation, "",
		"the arguments are not a JSON object (%v); send one object with the fields %s",
		err, requestFields,
	)
}

// Validate checks the shape of r: a known operation and kind, a well-formed
// name, and the fields the operation takes. The error is an *Error.
func (r Request) Validate() error {
	if !slices.Contains(Operations, r.Operation) {
		if r.Operation == "" {
			return fail(UnsupportedOperation, "operation", "missing; give one of create, replace, delete, list")
		}
		return fail(UnsupportedOperation, "operation", "%q is not one of create, replace, delete, list", r.Operation)
	}
	if r.Kind != "" && !slices.Contains(Kinds, r.Kind) {
		return fail(UnsupportedOperation, "kind", "%q is not one of skill, system_prompt, append_system, tool, hooks", r.Kind)
	}
	if r.Operation == OpList {
		switch {
		case r.Name != "":
			return fail(UnsupportedOperation, "name", "list takes no name; list a kind, or every kind")
		case r.Content != nil:
			return fail(UnsupportedOperation, "content", "list takes no content")
		case r.ExpectedDigest != "":
			return fail(UnsupportedOperation, "expected_digest", "list takes no expected_digest")
		}
		return nil
	}
	if r.Kind == "" {
		return fail(UnsupportedOperation, "kind", "missing; give one of skill, system_prompt, append_system, tool, hooks")
	}
	if err := checkName(r.Kind, r.Name); err != nil {
		return err
	}
	switch r.Operation {
	case OpCreate, OpReplace:
		if r.Content == nil {
			return fail(InvalidContent, "content", "missing; %s takes the artifact's complete content", r.Operation)
		}
	case OpDelete:
		if r.Content != nil {
			return fail(UnsupportedOperation, "content", "delete takes no content; leave it out")
		}
	}
	if r.ExpectedDigest != "" {
		if r.Operation == OpCreate {
			return fail(
				UnsupportedOperation, "expected_digest",
				"create takes no expected_digest: there is no revision yet; leave it out, or use replace",
			)
		}
		if !layer.IsDigest(r.ExpectedDigest) {
			return fail(
				StaleRevision, "expected_digest",
				"%q is not a digest; copy the artifact's current digest (sha256:<64 hex digits>) from list",
				truncate(r.ExpectedDigest, 80),
			)
		}
	}
	return nil
}

// maxSkillName bounds a skill's name, which is also a directory name.
const maxSkillName = 64

// checkName checks name for kind.
func checkName(kind Kind, name string) *Error {
	switch kind {
	case KindSkill:
		switch {
		case name == "":
			return fail(
				InvalidName, "name",
				"missing; a skill is named by lowercase letters, digits and single hyphens, such as release-notes",
			)
		case len(name) > maxSkillName || !skills.ValidName(name):
			return fail(
				InvalidName, "name",
				"%q is not a skill name: use 1 to %d lowercase letters, digits and single hyphens, such as release-notes",
				truncate(name, 80), maxSkillName,
			)
		}
	case KindTool:
		switch {
		case name == "":
			return fail(
				InvalidName, "name",
				"missing; a tool is named by 1 to 64 lowercase letters, digits or underscores, the name in its manifest",
			)
		case !extensions.ValidToolName(name):
			return fail(
				InvalidName, "name",
				"%q is not a tool name: use 1 to 64 lowercase letters, digits or underscores, as in the manifest's name field",
				truncate(name, 80),
			)
		}
	default:
		if name != "" && name != fileOf(kind) {
			return fail(InvalidName, "name", "a %s has no name (it is the user layer's %s); leave name out", kind, fileOf(kind))
		}
	}
	return nil
}

// fileOf is the file of a kind that has one per layer.
func fileOf(kind Kind) string {
	switch kind {
	case KindSystemPrompt:
		return extensions.SystemFile
	case KindAppendSystem:
		return extensions.AppendSystemFile
	case KindHooks:
		return HooksFile
	}
	return ""
}

// Path returns where an artifact of kind named name lives in the user
// layer, slash-separated from the layer's directory.
func Path(kind Kind, name string) string {
	switch kind {
	case KindSkill:
		return "skills/" + name + "/" + SkillFile
	case KindTool:
		return extensions.ToolsDir + "/" + name + ".toml"
	}
	return fileOf(kind)
}

// truncate cuts s for a message.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}
