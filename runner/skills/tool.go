package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/aerie-run/aerie/runner/layer"
	"github.com/aerie-run/aerie/runner/tools"
)

// ToolName is the name of the tool that reads skills.
const ToolName = "skill"

// Tool is the `skill` tool: it returns a skill's SKILL.md in full, or a
// file of the skill's directory. Skills outside the workspace — in the
// layers, $AERIE_HOME, plugins — cannot be reached by the file tools,
// which stay inside the workspace, so the model reads skills through
// this tool, and only inside the skill's own directory.
type Tool struct {
	set *Set
}

// NewTool returns the skill tool over set.
func NewTool(set *Set) *Tool { return &Tool{set: set} }

var _ tools.Tool = (*Tool)(nil)

// Name implements tools.Tool.
func (*Tool) Name() string { return ToolName }

// Description implements tools.Tool.
func (*Tool) Description() string {
	return "Read a skill: the full instructions of one of the skills listed in the system prompt. " +
		"Call it with the skill's name before starting a task the skill's description fits, then follow the instructions. " +
		"To read a file the skill refers to (such as references/guide.md), " +
		"pass its path relative to the skill's directory as file; " +
		"a directory's path lists it. Scripts a skill mentions are run with bash from the skill's directory."
}

var toolSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"name":{"type":"string","description":` +
	`"The skill's name, as listed in the system prompt (plugin skills as plugin:skill)."},` +
	`"file":{"type":"string","description":` +
	`"Optional: a file or directory of the skill, relative to its directory. Omit to read SKILL.md."}` +
	`},"required":["name"],"additionalProperties":false}`)

// Schema implements tools.Tool.
func (*Tool) Schema() json.RawMessage { return toolSchema }

type toolArgs struct {
	Name string `json:"name"`
	File string `json:"file"`
}

// Run implements tools.Tool.
func (t *Tool) Run(ctx context.Context, call json.RawMessage) tools.Result {
	var args toolArgs
	if len(bytes.TrimSpace(call)) == 0 {
		call = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(call))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return errorf("invalid arguments: %v", err)
	}
	name := strings.TrimPrefix(strings.TrimSpace(args.Name), "/")
	if name == "" {
		return errorf("missing required argument \"name\"")
	}
	sk, ok := t.set.Lookup(name)
	if !ok {
		return errorf("%v", t.set.notAvailable(name))
	}
	if f := strings.TrimSpace(args.File); !readsSkill(f) {
		return t.file(sk, f)
	}
	content, err := sk.Content()
	if err != nil {
		return errorf("%v", err)
	}
	return tools.Result{Content: fmt.Sprintf(
		"Skill %s\nDirectory: %s (files the skill refers to are relative to it)\n\n%s", sk.Name, sk.Dir, content)}
}

// fileName is the name of a skill's file.
const fileName = "SKILL.md"

// readsSkill reports whether a skill tool call's file argument (trimmed)
// reads the skill itself.
func readsSkill(file string) bool { return file == "" || file == fileName || file == "./"+fileName }

// file reads a file of the skill's directory, or lists a directory.
func (t *Tool) file(sk Skill, name string) tools.Result {
	clean := path.Clean(strings.TrimPrefix(name, "./"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return errorf("file %q: give a path relative to the skill's directory %s", name, sk.Dir)
	}
	r, err := sk.open()
	if err != nil {
		return errorf("skill %s: cannot open its directory: %s", sk.Name, describe(err))
	}
	defer r.Close()
	fi, err := stat(r, clean)
	if err != nil {
		return errorf("skill %s: file %q: %s", sk.Name, name, describeSkillFile(err))
	}
	if fi.IsDir() {
		entries, _, err := r.ReadDir(clean, 0)
		if err != nil {
			return errorf("skill %s: directory %q: %s", sk.Name, name, describeSkillFile(err))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Directory %s of skill %s:\n", clean, sk.Name)
		for _, e := range entries {
			b.WriteString(e.Name())
			if e.IsDir() {
				b.WriteByte('/')
			}
			b.WriteByte('\n')
		}
		return tools.Result{Content: b.String()}
	}
	res := readIn(r, clean)
	if res.err != nil {
		return errorf("skill %s: file %q: %v", sk.Name, name, res.err)
	}
	return tools.Result{Content: string(res.data)}
}

// stat describes the file name in dir, following links that stay in it.
func stat(dir *layer.Dir, name string) (fs.FileInfo, error) {
	f, err := dir.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

func describeSkillFile(err error) string {
	if isNotExist(err) {
		return "no such file in the skill's directory"
	}
	s := describe(err)
	if s == "it leads outside the workspace" {
		return "it leads outside the skill's directory"
	}
	return s
}

func errorf(format string, args ...any) tools.Result {
	return tools.Result{Content: ToolName + ": " + fmt.Sprintf(format, args...), IsError: true}
}

// isNotExist reports a missing file behind any wrapping.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
