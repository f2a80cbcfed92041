package userlayer

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aerie-run/aerie/runner/tools"
)

// ToolName is the model-facing name of the manager's tool.
const ToolName = "extension_manage"

// Tool is the extension_manage tool over a Manager.
type Tool struct {
	m *Manager
}

// NewTool returns the extension_manage tool of m.
func NewTool(m *Manager) *Tool { return &Tool{m: m} }

var _ tools.Tool = (*Tool)(nil)

// Name implements tools.Tool.
func (*Tool) Name() string { return ToolName }

// Description implements tools.Tool.
func (*Tool) Description() string {
	return "Manage your own extensions in the user layer ($AERIE_HOME), for this and later sessions: " +
		"create, replace, delete or list skills (skills/<name>/SKILL.md), the replacement system prompt (SYSTEM.md), " +
		"the appended system prompt (APPEND_SYSTEM.md), custom tools (tools/<name>.toml) and hooks (hooks.toml). " +
		"create and replace take the complete content (at most 256 KiB of text, no secrets), " +
		"checked as a session loads it. " +
		"Pass expected_digest (from list) to replace or delete, so that you never overwrite a change you have not seen. " +
		"A change takes effect at the next turn boundary. " +
		"Tools and hooks you write stay inactive until a person pins them in trust.toml. " +
		"list returns names, digests, provenance and states, never the contents. " +
		"A failure names its category (invalid_name, invalid_content, name_collision, already_exists, not_found, " +
		"stale_revision, unsupported_operation, storage_unavailable), the field and the fix."
}

var toolSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"operation":{"type":"string","enum":["create","replace","delete","list"],"description":"What to do."},` +
	`"kind":{"type":"string","enum":["skill","system_prompt","append_system","tool","hooks"],` +
	`"description":"The kind of artifact; optional for list."},` +
	`"name":{"type":"string","description":"A skill's name (lowercase letters, digits, hyphens) ` +
	`or a tool's (lowercase letters, digits, underscores; the manifest's name). ` +
	`Omit for system_prompt, append_system and hooks."},` +
	`"content":{"type":"string","description":"create and replace: the complete file — ` +
	`SKILL.md with frontmatter, prompt text, a tool's TOML manifest, or hooks.toml."},` +
	`"expected_digest":{"type":"string","description":"replace and delete: the artifact's digest as list shows it ` +
	`(sha256:…); a mismatch fails with stale_revision and writes nothing."}` +
	`},"required":["operation"],"additionalProperties":false}`)

// Schema implements tools.Tool.
func (*Tool) Schema() json.RawMessage { return toolSchema }

// Run implements tools.Tool. The result is a JSON object: {"ok": true, …}
// with what was done, or {"ok": false, "category", "field", "message"}.
func (t *Tool) Run(ctx context.Context, call json.RawMessage) tools.Result {
	req, err := DecodeRequest(call)
	if err == nil {
		var res Result
		res, err = t.m.Apply(ctx, req)
		if err == nil {
			return encode(struct {
				OK bool `json:"ok"`
				Result
			}{true, res}, false)
		}
	}
	e, ok := errors.AsType[*Error](err)
	if !ok {
		e = storage(err)
	}
	return encode(struct {
		OK bool `json:"ok"`
		*Error
	}{false, e}, true)
}

func encode(v any, isError bool) tools.Result {
	b, err := json.Marshal(v)
	if err != nil {
		return tools.Result{Content: ToolName + ": encode the result: " + err.Error(), IsError: true}
	}
	return tools.Result{Content: string(b), IsError: isError}
}
