package extensions

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/aerie-run/aerie/runner/layer"
)

// Prompt files and settings.
const (
	// SystemPromptFileEnv names a file that replaces the persona prompt.
	SystemPromptFileEnv = "AERIE_SYSTEM_PROMPT_FILE"
	// SystemFile replaces the persona prompt; the nearest one wins.
	SystemFile = "SYSTEM.md"
	// AppendSystemFile is appended after the base; every readable one is.
	AppendSystemFile = "APPEND_SYSTEM.md"
	// InstructionBudget bounds the project instructions (AGENTS.md,
	// CLAUDE.md) in the prompt: the spec's 32 KiB.
	InstructionBudget = 32 << 10
	// TruncatedMarker ends project instructions cut at the budget.
	TruncatedMarker = "[truncated]"
)

// Instruction file names, in the order tried in each directory: CLAUDE.md
// is read only where AGENTS.md is absent.
var instructionFiles = []string{"AGENTS.md", "CLAUDE.md"}

// Fragment is one file's contribution to the prompt.
type Fragment struct {
	// Path is the file.
	Path string `json:"path"`
	// Text is what it contributes.
	Text string `json:"-"`
}

// Prompt is a composed system prompt.
type Prompt struct {
	// Base is the persona prompt, or the file that replaced it.
	Base string
	// BaseSource is "persona", or the path of the file that replaced it.
	BaseSource string
	// Appends are the APPEND_SYSTEM.md files, nearest layer first.
	Appends []Fragment
	// Instructions are the AGENTS.md and CLAUDE.md files from the
	// workspace root down to the working directory, each headed by its
	// path, within InstructionBudget.
	Instructions []Fragment
	// Truncated means the instructions went over the budget: their tail
	// was cut and TruncatedMarker added.
	Truncated bool
}

// Text returns the prompt: the base, the appended fragments, then the
// project instructions, separated by blank lines.
func (p Prompt) Text() string {
	var parts []string
	if p.Base != "" {
		parts = append(parts, p.Base)
	}
	for _, f := range p.Appends {
		parts = append(parts, f.Text)
	}
	if ins := p.InstructionText(); ins != "" {
		parts = append(parts, ins)
	}
	return strings.Join(parts, "\n\n")
}

// InstructionText returns the project instructions alone, as they appear
// at the end of Text: at most InstructionBudget bytes, then the marker
// when they were cut.
func (p Prompt) InstructionText() string {
	var b strings.Builder
	for i, f := range p.Instructions {
		if i > 0 {
			b.WriteString(instructionSep)
		}
		b.WriteString(f.Text)
	}
	if p.Truncated {
		b.WriteString("\n" + TruncatedMarker)
	}
	return b.String()
}

const instructionSep = "\n\n"

// ComposePrompt composes the system prompt of src around persona, the
// persona's base prompt. The error means src is unusable.
//
// The base is the file AERIE_SYSTEM_PROMPT_FILE names, if it can be read;
// otherwise the nearest SYSTEM.md, if it can be read; otherwise persona.
// A nearest SYSTEM.md that cannot be read gives persona: a farther one is
// never used in its place. Every readable APPEND_SYSTEM.md follows, nearest
// layer first, then the project instructions.
func ComposePrompt(src layer.Source, persona string) (Prompt, []layer.Artifact, error) {
	v, err := src.Open()
	if err != nil {
		return Prompt{}, nil, err
	}
	defer v.Close()
	p, arts := composePrompt(v, persona)
	return p, arts, nil
}

func composePrompt(v *layer.View, persona string) (Prompt, []layer.Artifact) {
	p := Prompt{Base: persona, BaseSource: "persona"}
	var arts []layer.Artifact

	// decider is the index in arts of what decided the base: the
	// environment's file or the nearest SYSTEM.md, read or not. It
	// shadows every farther SYSTEM.md.
	decider := -1
	if name := v.Getenv(SystemPromptFileEnv); name != "" {
		path := name
		if !filepath.IsAbs(path) && v.Workspace != "" {
			path = filepath.Join(v.Workspace, v.WorkRel, path)
		}
		a := layer.EnvironmentArtifact(TypeSystemPrompt, SystemPromptFileEnv, path)
		doc, err := readOSFile(path, layer.MaxArtifactBytes)
		if err != nil {
			a.Skip(fmt.Errorf("read %s: %w; using the layered %s", SystemPromptFileEnv, err, SystemFile))
		} else {
			a.Status, a.Digest = layer.StatusActive, layer.Digest(doc)
			p.Base, p.BaseSource = text(doc), path
			decider = len(arts)
		}
		arts = append(arts, a)
	}
	// Every layer's files are read at once; what they mean is decided in
	// layer order.
	files := eachLayer(v, func(lv layer.Opened) [2]promptFile {
		return [2]promptFile{readPromptFile(lv, SystemFile), readPromptFile(lv, AppendSystemFile)}
	})
	for i, lv := range v.Layers {
		f := files[i][0]
		if !f.there {
			continue
		}
		a := layer.NewArtifact(TypeSystemPrompt, lv, SystemFile)
		a.Name = SystemFile
		doc, err := f.doc, f.err
		if err == nil {
			a.Digest = layer.Digest(doc)
			a.SetProvenance(f.prov)
		}
		switch {
		case decider >= 0:
			d := &arts[decider]
			a.Shadow(d)
			if d.Status == layer.StatusSkipped {
				a.Reason = fmt.Sprintf("not used: the nearer %s could not be read, and a farther one never replaces it", d.Path)
			}
		case err != nil:
			a.Skip(fmt.Errorf("read %s: %w; using the persona prompt (a farther %s is not used after a read failure)",
				SystemFile, layer.ExplainEscape(err), SystemFile))
			decider = len(arts)
		default:
			a.Status = layer.StatusActive
			p.Base, p.BaseSource = text(doc), a.Path
			decider = len(arts)
		}
		arts = append(arts, a)
	}

	for i, lv := range v.Layers {
		f := files[i][1]
		if !f.there {
			continue
		}
		a := layer.NewArtifact(TypeAppendSystem, lv, AppendSystemFile)
		a.Name = AppendSystemFile
		if f.err != nil {
			a.Skip(fmt.Errorf("read %s: %w", AppendSystemFile, layer.ExplainEscape(f.err)))
		} else {
			a.Status, a.Digest = layer.StatusActive, layer.Digest(f.doc)
			a.SetProvenance(f.prov)
			p.Appends = append(p.Appends, Fragment{Path: a.Path, Text: text(f.doc)})
		}
		arts = append(arts, a)
	}

	ins, truncated, insArts := readInstructions(v)
	p.Instructions, p.Truncated = ins, truncated
	arts = append(arts, insArts...)
	return p, arts
}

// promptFile is a prompt file of one layer as read: there at all, its
// bytes or why they cannot be read, and its provenance.
type promptFile struct {
	there bool
	doc   []byte
	err   error
	prov  layer.Provenance
}

func readPromptFile(lv layer.Opened, name string) promptFile {
	if !lv.Files.There(name) {
		return promptFile{}
	}
	f := promptFile{there: true}
	if f.doc, f.err = lv.Files.ReadFile(name, layer.MaxArtifactBytes); f.err == nil {
		f.prov = lv.Files.Provenance(name, f.doc)
	}
	return f
}

// readInstructions reads the project instructions of each directory from
// the workspace root down to the working directory (ReadInstructions).
func readInstructions(v *layer.View) ([]Fragment, bool, []layer.Artifact) {
	if v.WorkspaceDir() == nil {
		return nil, false, nil
	}
	return ReadInstructions(v.WorkspaceDir(), v.Workspace, dirsDown(v.WorkRel))
}

// ReadInstructions reads AGENTS.md (or CLAUDE.md where AGENTS.md is
// absent) in each of dirs, relative to the workspace root ws (whose path
// is workspace), in order, within InstructionBudget: each fragment is
// headed by the file's path in the workspace, and truncated says the
// budget cut the last one (whose text then does not end with
// TruncatedMarker: InstructionText adds it). No file is read past the
// budget, and every read goes through ws, so a link cannot lead out of the
// workspace. The system prompt's instructions and those that follow the
// agent deeper into the tree are read by these same rules.
func ReadInstructions(
	ws *layer.Dir, workspace string, dirs []string,
) (_ []Fragment, truncated bool, _ []layer.Artifact) {
	var (
		frags []Fragment
		arts  []layer.Artifact
		used  int
	)
	for _, dir := range dirs {
		chosen := -1 // the file this directory contributes, in arts
		for _, name := range instructionFiles {
			rel := filepath.Join(dir, name)
			if _, err := ws.Lstat(filepath.ToSlash(rel)); layer.Absent(err) {
				continue
			}
			a := layer.Artifact{
				Type: TypeInstructions, Name: name, Layer: "workspace", LayerKind: layer.KindProject,
				Path: filepath.Join(workspace, rel),
			}
			if chosen >= 0 {
				a.Shadow(&arts[chosen])
				arts = append(arts, a)
				continue
			}
			chosen = len(arts)
			header := fmt.Sprintf("Project instructions from %s:\n\n", filepath.ToSlash(rel))
			sep := 0
			if len(frags) > 0 {
				sep = len(instructionSep)
			}
			room := InstructionBudget - used - sep - len(header)
			if truncated || room <= 0 {
				truncated = true
				a.Status, a.Reason = layer.StatusSkipped, fmt.Sprintf(
					"not included: the project instructions are over the %s budget", layer.ByteSize(InstructionBudget))
				arts = append(arts, a)
				continue
			}
			doc, more, err := readHead(ws, rel, int64(room))
			if err != nil {
				a.Skip(fmt.Errorf("read %s: %w", name, layer.ExplainEscape(err)))
				arts = append(arts, a)
				continue
			}
			a.Status = layer.StatusActive
			body := text(doc)
			if len(body) > room {
				// Invalid UTF-8 replaced by U+FFFD takes more room.
				body, more = string(cutUTF8([]byte(body[:room]))), true
			}
			if more {
				truncated = true
				body = string(cutUTF8([]byte(body)))
				a.Reason = fmt.Sprintf("truncated: the project instructions are over the %s budget",
					layer.ByteSize(InstructionBudget))
			} else {
				a.Digest = layer.Digest(doc)
			}
			f := Fragment{Path: a.Path, Text: header + body}
			frags = append(frags, f)
			used += sep + len(f.Text)
			arts = append(arts, a)
		}
	}
	return frags, truncated, arts
}

// dirsDown returns the directories from the workspace root (".") down to
// rel.
func dirsDown(rel string) []string {
	dirs := []string{"."}
	if rel == "." || rel == "" {
		return dirs
	}
	cur := ""
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		dirs = append(dirs, cur)
	}
	return dirs
}

// readHead reads at most n bytes of the regular file name in dir; more
// says the file is longer.
func readHead(dir *layer.Dir, name string, n int64) ([]byte, bool, error) {
	f, err := dir.Open(filepath.ToSlash(name))
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, false, layer.ErrNotRegular
	}
	b, err := io.ReadAll(io.LimitReader(f, n+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > n {
		return b[:n], true, nil
	}
	return b, false, nil
}

// readOSFile reads a file named by the environment, bounded like an
// artifact.
func readOSFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	return readBounded(f, max)
}

// readBounded reads the regular file f, failing with ErrTooLarge beyond
// max bytes without reading more than max+1.
func readBounded(f *os.File, max int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, layer.ErrNotRegular
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %d bytes, over the %s limit", layer.ErrTooLarge, fi.Size(), layer.ByteSize(max))
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		// It grew after the stat.
		return nil, fmt.Errorf("%w: over the %s limit", layer.ErrTooLarge, layer.ByteSize(max))
	}
	return b, nil
}

// cutUTF8 drops a character cut in two at the end of b.
func cutUTF8(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// text returns a file's bytes as prompt text: invalid UTF-8 replaced,
// trailing blank space dropped (parts are joined with blank lines).
func text(b []byte) string {
	return strings.TrimRight(strings.ToValidUTF8(string(b), "\uFFFD"), " \t\r\n")
}
