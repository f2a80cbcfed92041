package provider

import (
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// ParseScript decodes a script: the model turns a Scripted provider replays.
// name identifies the script in errors (usually its path); an error names the
// line and the turn at fault, as in "demo.yaml:12: turns[2].tool_calls[0]:
// name is required".
//
// A script is YAML (and so also JSON) of this form:
//
//	# Each request the agent sends is answered with the next turn.
//	turns:
//	  - reasoning: I should look before I change anything.  # optional
//	    text: I'll list the files first.                     # optional
//	    tool_calls:                                          # optional
//	      - name: bash                  # required
//	        id: call_1                  # optional; default call_<turn>_<n>, from 1
//	        arguments: {command: ls}    # a mapping, sent as its JSON;
//	                                    # or a string, sent verbatim even if it is
//	                                    # not valid JSON (to test the error path);
//	                                    # absent or empty means {}
//	    usage:                          # optional; all default to 0
//	      input_tokens: 1200            # every input token, cached ones included
//	      output_tokens: 35
//	      cache_read_tokens: 1000
//	      cache_write_tokens: 0
//	    stop_reason: tool_use           # optional; default tool_use with tool
//	                                    # calls, else end_turn
//	  - text: There are two files.
//
// A turn needs reasoning, text or tool calls. Unknown fields are errors, so
// that a misspelt field does not silently change a demo.
func ParseScript(name string, data []byte) ([]Response, error) {
	p := scriptParser{name: name, ids: map[string]string{}}
	turns, err := p.parse(data)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	return turns, nil
}

type scriptParser struct {
	name string
	ids  map[string]string // tool call id -> where it was first used
}

// fail is an error at node, with the path of the field in the script.
func (p *scriptParser) fail(n *yaml.Node, path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	return fmt.Errorf("%s:%d: %s", p.name, n.Line, msg)
}

func (p *scriptParser) parse(data []byte) ([]Response, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: the script is empty; want a mapping with a turns list", p.name)
	}
	root := resolve(doc.Content[0])
	var turnsNode *yaml.Node
	err := p.fields(root, "", func(key string, v *yaml.Node) error {
		if key != "turns" {
			return p.fail(v, "", "unknown field %q; a script has only turns", key)
		}
		turnsNode = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if turnsNode == nil || isNull(turnsNode) {
		return nil, p.fail(root, "", "no turns")
	}
	if turnsNode.Kind != yaml.SequenceNode {
		return nil, p.fail(turnsNode, "turns", "want a list of turns")
	}
	if len(turnsNode.Content) == 0 {
		return nil, p.fail(turnsNode, "turns", "no turns")
	}
	turns := make([]Response, 0, len(turnsNode.Content))
	for i, n := range turnsNode.Content {
		t, err := p.turn(resolve(n), i)
		if err != nil {
			return nil, err
		}
		turns = append(turns, t)
	}
	return turns, nil
}

func (p *scriptParser) turn(n *yaml.Node, i int) (Response, error) {
	path := fmt.Sprintf("turns[%d]", i)
	var reasoning, text, stop string
	var calls []Content
	var usage Usage
	err := p.fields(n, path, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "reasoning":
			reasoning, err = p.str(v, path+"."+key)
		case "text":
			text, err = p.str(v, path+"."+key)
		case "stop_reason":
			stop, err = p.str(v, path+"."+key)
		case "usage":
			usage, err = p.usage(v, path+"."+key)
		case "tool_calls":
			calls, err = p.toolCalls(v, path+"."+key, i)
		default:
			err = p.fail(v, path, "unknown field %q; a turn has text, reasoning, tool_calls, usage and stop_reason", key)
		}
		return err
	})
	if err != nil {
		return Response{}, err
	}
	msg := Message{Role: RoleAssistant}
	if reasoning != "" {
		msg.Content = append(msg.Content, Content{Type: ContentReasoning, Text: reasoning})
	}
	if text != "" {
		msg.Content = append(msg.Content, Text(text))
	}
	msg.Content = append(msg.Content, calls...)
	if len(msg.Content) == 0 {
		return Response{}, p.fail(n, path, "a turn needs text, reasoning or tool_calls")
	}
	reason := StopReason(stop)
	switch reason {
	case StopEndTurn, StopToolUse, StopMaxTokens, StopSequence, StopRefusal, StopContextWindow:
	case "":
		reason = StopEndTurn
		if len(calls) > 0 {
			reason = StopToolUse
		}
	default:
		return Response{}, p.fail(n, path+".stop_reason", "%q is not a stop reason; "+
			"want end_turn, tool_use, max_tokens, stop_sequence, refusal or context_window_exceeded", stop)
	}
	return Response{Message: msg, Usage: usage, StopReason: reason}, nil
}

func (p *scriptParser) toolCalls(n *yaml.Node, path string, turn int) ([]Content, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.fail(n, path, "want a list of tool calls")
	}
	var calls []Content
	for j, cn := range n.Content {
		cn = resolve(cn)
		cpath := fmt.Sprintf("%s[%d]", path, j)
		call := Content{Type: ContentToolCall, Arguments: "{}"}
		err := p.fields(cn, cpath, func(key string, v *yaml.Node) error {
			var err error
			switch key {
			case "name":
				call.ToolName, err = p.str(v, cpath+".name")
			case "id":
				call.ToolCallID, err = p.str(v, cpath+".id")
			case "arguments":
				call.Arguments, err = p.arguments(v, cpath+".arguments")
			default:
				err = p.fail(v, cpath, "unknown field %q; a tool call has name, id and arguments", key)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if call.ToolName == "" {
			return nil, p.fail(cn, cpath, "name is required")
		}
		if call.ToolCallID == "" {
			call.ToolCallID = fmt.Sprintf("call_%d_%d", turn+1, j+1)
		}
		if prev, dup := p.ids[call.ToolCallID]; dup {
			return nil, p.fail(cn, cpath, "tool call id %q is already used by %s", call.ToolCallID, prev)
		}
		p.ids[call.ToolCallID] = cpath
		calls = append(calls, call)
	}
	return calls, nil
}

// arguments returns a tool call's arguments as JSON text: a mapping is
// encoded, a string is taken as it is.
func (p *scriptParser) arguments(n *yaml.Node, path string) (string, error) {
	switch {
	case isNull(n):
		return "{}", nil
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		if n.Value == "" {
			return "{}", nil
		}
		return n.Value, nil
	case n.Kind == yaml.MappingNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return "", p.fail(n, path, "%v", err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return "", p.fail(n, path, "cannot be written as JSON: %v", err)
		}
		return string(b), nil
	}
	return "", p.fail(n, path, "want a mapping, or a string of JSON")
}

func (p *scriptParser) usage(n *yaml.Node, path string) (Usage, error) {
	var u Usage
	if isNull(n) {
		return u, nil
	}
	err := p.fields(n, path, func(key string, v *yaml.Node) error {
		var dst *int64
		switch key {
		case "input_tokens":
			dst = &u.InputTokens
		case "output_tokens":
			dst = &u.OutputTokens
		case "cache_read_tokens":
			dst = &u.CacheReadTokens
		case "cache_write_tokens":
			dst = &u.CacheWriteTokens
		default:
			return p.fail(v, path,
				"unknown field %q; usage has input_tokens, output_tokens, cache_read_tokens and cache_write_tokens", key)
		}
		if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
			return p.fail(v, path+"."+key, "want a whole number")
		}
		var x int64
		if err := v.Decode(&x); err != nil || x < 0 {
			return p.fail(v, path+"."+key, "want a whole number of tokens, not %q", v.Value)
		}
		*dst = x
		return nil
	})
	if err != nil {
		return u, err
	}
	if u.CacheReadTokens > u.InputTokens-u.CacheWriteTokens || u.CacheWriteTokens > u.InputTokens {
		return u, p.fail(n, path,
			"cache_read_tokens and cache_write_tokens are parts of input_tokens and cannot add up to more")
	}
	return u, nil
}

func (p *scriptParser) str(n *yaml.Node, path string) (string, error) {
	if isNull(n) {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", p.fail(n, path, "want a string")
	}
	return n.Value, nil
}

// fields calls f for each key of the mapping n, in order, and rejects a key
// given twice.
func (p *scriptParser) fields(n *yaml.Node, path string, f func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		what := path
		if what == "" {
			what = "the script"
		}
		return p.fail(n, "", "%s: want a mapping", what)
	}
	seen := map[string]bool{}
	for k := 0; k+1 < len(n.Content); k += 2 {
		kn, vn := n.Content[k], resolve(n.Content[k+1])
		if kn.Kind != yaml.ScalarNode {
			return p.fail(kn, path, "want field names")
		}
		if seen[kn.Value] {
			return p.fail(kn, path, "field %q is given twice", kn.Value)
		}
		seen[kn.Value] = true
		if err := f(kn.Value, vn); err != nil {
			return err
		}
	}
	return nil
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}
