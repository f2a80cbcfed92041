// Package approvals reads saved approvals: approvals.toml files that decide
// in advance tool calls a lifecycle hook asks a person about, so that a
// call someone approved once (or always refuses) does not pause the
// session again. A store is read from the layers whoever runs the session
// controls — $AERIE_HOME locally, the spec, namespace and platform layers
// in a pod — never from the workspace, which must not approve its own
// calls. A missing file is an empty store; so is a malformed one (the
// spec's rule), with a warning naming the file and the problem.
//
// The format:
//
//	[[approval]]
//	tool = "bash"                       # anchored regular expression over the tool name
//	input = { command = "git (status|diff)( .*)?" }  # optional: per argument, anchored
//	decision = "allow"                  # or "deny"; allow when omitted
//	reason = "read-only git commands"   # optional
//
// The first rule that matches decides; a call no rule matches goes to the
// session's approval policy.
package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/pelletier/go-toml/v2"

	"github.com/aerie-run/aerie/runner/hooks"
	"github.com/aerie-run/aerie/runner/layer"
)

// FileName is the saved approvals' file in a layer.
const FileName = "approvals.toml"

// Policy is the name the approvals decided by a saved approval record.
const Policy = "approvals.toml"

// Rule is one saved approval.
type Rule struct {
	tool  *regexp.Regexp
	input map[string]*regexp.Regexp
	// Allow is the decision.
	Allow bool
	// Reason explains it.
	Reason string
	// File is where the rule is, for the approval's reason.
	File string
}

// Store is the saved approvals of a session, in order. The zero Store is
// empty.
type Store struct{ rules []Rule }

// Len is the number of rules.
func (s Store) Len() int { return len(s.rules) }

type fileDoc struct {
	Approval []ruleDoc `toml:"approval"`
}

type ruleDoc struct {
	Tool     string            `toml:"tool"`
	Input    map[string]string `toml:"input"`
	Decision string            `toml:"decision"`
	Reason   string            `toml:"reason"`
}

// Parse reads one approvals.toml; file names it in the rules and errors.
// Any problem rejects the whole file: half a file of decisions meant
// together is not what was saved.
func Parse(data []byte, file string) (rules []Rule, err error) {
	defer func() {
		if r := recover(); r != nil {
			rules, err = nil, fmt.Errorf("%s: cannot parse TOML: internal error: %v", file, r)
		}
	}()
	var doc fileDoc
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var de *toml.DecodeError
		var se *toml.StrictMissingError
		switch {
		case errors.As(err, &de):
			row, col := de.Position()
			return nil, fmt.Errorf("%s: invalid TOML at line %d, column %d: %s", file, row, col, de.Error())
		case errors.As(err, &se):
			return nil, fmt.Errorf("%s: unknown field: %s (an [[approval]] has tool, input, decision and reason)",
				file, se.Error())
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for i, d := range doc.Approval {
		r, err := compile(d, file)
		if err != nil {
			return nil, fmt.Errorf("%s: approval[%d].%w", file, i, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func compile(d ruleDoc, file string) (Rule, error) {
	r := Rule{Reason: d.Reason, File: file}
	switch d.Decision {
	case "", "allow":
		r.Allow = true
	case "deny":
	default:
		return Rule{}, fmt.Errorf("decision: %q: want allow or deny", d.Decision)
	}
	if d.Tool == "" {
		return Rule{}, errors.New("tool: missing: name the tool (a regular expression over its whole name)")
	}
	var err error
	if r.tool, err = anchored(d.Tool); err != nil {
		return Rule{}, fmt.Errorf("tool: %w", err)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Input)) {
		re, err := anchored(d.Input[k])
		if err != nil {
			return Rule{}, fmt.Errorf("input.%s: %w", k, err)
		}
		if r.input == nil {
			r.input = map[string]*regexp.Regexp{}
		}
		r.input[k] = re
	}
	return r, nil
}

func anchored(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %v", pattern, err)
	}
	return re, nil
}

// Match reports whether r decides a call of tool with input (a JSON
// object): the tool's name matches, and each argument the rule names is
// present and matches (a string argument as its text, any other as its
// JSON).
func (r Rule) Match(tool string, input json.RawMessage) bool {
	if !r.tool.MatchString(tool) {
		return false
	}
	if len(r.input) == 0 {
		return true
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(input, &args) != nil {
		return false
	}
	for k, re := range r.input {
		raw, ok := args[k]
		if !ok {
			return false
		}
		text := string(raw)
		var s string
		if json.Unmarshal(raw, &s) == nil {
			text = s
		}
		if !re.MatchString(text) {
			return false
		}
	}
	return true
}

// Load reads the approvals.toml of each layer that may hold saved
// approvals (see package doc), nearest first. A missing file adds nothing;
// a malformed one adds nothing and is logged as a warning.
func Load(layers []layer.Layer, log *slog.Logger) Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var s Store
	for _, l := range layers {
		if !honoured(l) || l.Dir == "" {
			continue
		}
		path := filepath.Join(l.Dir, FileName)
		data, err := os.ReadFile(path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				log.Warn("saved approvals not read; none are used from this file", "file", path, "err", err)
			}
			continue
		}
		rules, err := Parse(data, path)
		if err != nil {
			log.Warn("saved approvals malformed; none are used from this file", "file", path, "err", err)
			continue
		}
		s.rules = append(s.rules, rules...)
	}
	return s
}

// honoured reports whether saved approvals are read from l: layers the
// session's submitter controls, never the workspace's.
func honoured(l layer.Layer) bool {
	switch l.Kind {
	case layer.KindHome, layer.KindSpec, layer.KindNamespace, layer.KindPlatform:
		return true
	}
	return false
}

// Decide returns the decision of the first rule that matches req.
func (s Store) Decide(req hooks.ApprovalRequest) (hooks.Approval, bool) {
	for _, r := range s.rules {
		if !r.Match(req.Tool, req.Input) {
			continue
		}
		reason := r.Reason
		if reason == "" {
			verb := "approved"
			if !r.Allow {
				verb = "denied"
			}
			reason = fmt.Sprintf("%s by a saved approval in %s", verb, r.File)
		}
		if req.Reason != "" {
			reason = req.Reason + " (" + reason + ")"
		}
		return hooks.Approval{Allowed: r.Allow, Reason: reason, Policy: Policy}, true
	}
	return hooks.Approval{}, false
}

// Then returns the policy that decides by the saved approvals first, and
// leaves the calls they do not decide to next (hooks.DenyApprovals when
// nil).
func (s Store) Then(next hooks.ApprovalPolicy) hooks.ApprovalPolicy {
	if next == nil {
		next = hooks.DenyApprovals
	}
	if len(s.rules) == 0 {
		return next
	}
	return func(ctx context.Context, req hooks.ApprovalRequest) hooks.Approval {
		if a, ok := s.Decide(req); ok {
			return a
		}
		return next(ctx, req)
	}
}
