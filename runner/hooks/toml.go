package hooks

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/aerie-run/aerie/runner/layer"
)

// ParseTOML reads a hooks.toml file:
//
//	[[hooks.PreToolUse]]
//	matcher = "bash|write_file"
//	[[hooks.PreToolUse.hooks]]
//	command = "./guard.sh"
//	timeout_secs = 10
//
// workdir is the agent's working directory, where the commands run; it
// resolves their relative executables for trust pins. A file with any
// problem yields no hooks: running half of a file meant as a whole (a
// guard without its matcher, say) would be worse than running none.
func ParseTOML(data []byte, src Source, workdir string) (hooks []Hook, probs []layer.Problem) {
	ps := &problems{src: src}
	defer func() {
		// The TOML library is fuzzed upstream, but a panic on a
		// repository's file must not take the runner down.
		if r := recover(); r != nil {
			hooks, probs = nil, []layer.Problem{{
				Layer: src.Layer.Name, File: src.File, Reason: fmt.Sprintf("cannot parse TOML: internal error: %v", r),
			}}
		}
	}()
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			ps.add("", "invalid TOML at line %d, column %d: %s", row, col, strings.TrimPrefix(de.Error(), "toml: "))
		} else {
			ps.add("", "invalid TOML: %v", err)
		}
		return nil, ps.list
	}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if k != hooksKey {
			ps.add(k, "unknown field; hooks.toml has only [[hooks.<Event>]] tables")
		}
	}
	var out []Hook
	if raw, ok := doc[hooksKey]; ok {
		events, ok := raw.(map[string]any)
		if !ok {
			ps.add("hooks", "must be a table of events, such as [[hooks.PreToolUse]]")
			return nil, ps.list
		}
		for _, name := range slices.Sorted(maps.Keys(events)) {
			field := "hooks." + name
			ev, ok := knownEvent(name)
			if !ok {
				ps.add(field, "unknown event %q; the events are %s", name, eventNames())
				continue
			}
			groups, ok := tomlTables(events[name])
			if !ok {
				ps.add(field, "must be an array of tables: write [[%s]]", field)
				continue
			}
			for i, g := range groups {
				out = append(out, tomlGroup(ps, src, workdir, ev, fmt.Sprintf("%s[%d]", field, i), g)...)
			}
		}
	}
	if len(ps.list) > 0 {
		return nil, ps.list
	}
	return out, nil
}

// tomlTables returns v as an array of tables.
func tomlTables(v any) ([]map[string]any, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]map[string]any, len(arr))
	for i, e := range arr {
		if out[i], ok = e.(map[string]any); !ok {
			return nil, false
		}
	}
	return out, true
}

func tomlGroup(ps *problems, src Source, workdir string, ev Event, field string, g map[string]any) []Hook {
	var m Matcher
	for _, k := range slices.Sorted(maps.Keys(g)) {
		switch k {
		case matcherKey:
			s, ok := g[k].(string)
			if !ok {
				ps.add(field+".matcher", "must be a string: an anchored regular expression over the tool name")
				continue
			}
			var err error
			if m, err = compileTOML(s); err != nil {
				ps.add(field+".matcher", "%v", err)
			}
		case hooksKey:
		default:
			ps.add(field+"."+k, "unknown field; a group has matcher and [[…hooks]]")
		}
	}
	raw, ok := g[hooksKey]
	if !ok {
		ps.add(field, "missing [[%s.hooks]]: a group needs at least one hook", field)
		return nil
	}
	hs, ok := tomlTables(raw)
	if !ok {
		ps.add(field+".hooks", "must be an array of tables: write [[%s.hooks]]", field)
		return nil
	}
	var out []Hook
	for j, h := range hs {
		hf := fmt.Sprintf("%s.hooks[%d]", field, j)
		hook := Hook{
			ID: src.File + "#" + hf[len("hooks."):], Event: ev, Format: FormatTOML, Matcher: m,
			Shell: "sh", Timeout: DefaultTOMLTimeout, OnFailure: FailAllow, Source: src,
		}
		ok := true
		for _, k := range slices.Sorted(maps.Keys(h)) {
			switch k {
			case commandKey:
				s, isStr := h[k].(string)
				if !isStr || s == "" {
					ps.add(hf+".command", "must be a non-empty string: the command line run with sh -c")
					ok = false
					continue
				}
				hook.Command = s
			case "timeout_secs":
				n, isInt := h[k].(int64)
				if !isInt || n <= 0 || n > math.MaxInt64/int64(time.Second) {
					ps.add(hf+".timeout_secs", "must be a positive whole number of seconds (the default is 600)")
					ok = false
					continue
				}
				hook.Timeout = time.Duration(n) * time.Second
			case typeKey:
				if s, _ := h[k].(string); s != commandType {
					ps.add(hf+".type", "must be \"command\", the only hook type")
					ok = false
				}
			default:
				ps.add(hf+"."+k, "unknown field; a hook has command and timeout_secs")
				ok = false
			}
		}
		if _, has := h[commandKey]; !has {
			ps.add(hf, "missing command: the command line run with sh -c")
			ok = false
		}
		if !ok {
			continue
		}
		if exe, ok := commandExecutable(hook.Command, workdir, homeOf(src)); ok {
			hook.Executables = []string{exe}
		}
		out = append(out, hook)
	}
	return out
}
