package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/aerie-run/aerie/runner/plugins"
	"github.com/aerie-run/aerie/runner/pricing"
)

// settings is what one file sets. Nil means "not set here", so that a project
// file overrides only the keys it names.
type settings struct {
	DatabaseURL     *string
	Model           modelLayer
	ToolResults     toolResultsLayer
	PluginsDisabled *[]string
	PluginsComps    *plugins.Components
	CompactionModel *string
	Subagents       subagentsLayer
	MoA             moaLayer
	// Prices are the file's [prices."model"] tables; nil when it has none.
	Prices pricing.Table
}

type modelLayer struct {
	StreamIdleTimeoutSecs *int
	MaxAnswerBytes        *int
}

type moaLayer struct {
	ReferenceModels *[]ModelRef
	AggregatorModel *ModelRef
}

type subagentsLayer struct {
	MaxConcurrent *int
	MaxDepth      *int
	MaxTotal      *int
}

type toolResultsLayer struct {
	CompressContext *bool
	MaxBytes        *int
	MaxLines        *int
	HeadBytes       *int
	TailBytes       *int
}

// apply returns c with the keys l sets replaced.
func (l settings) apply(c Config) Config {
	set(&c.DatabaseURL, l.DatabaseURL)
	if l.Model.StreamIdleTimeoutSecs != nil {
		c.Model.StreamIdleTimeout = time.Duration(*l.Model.StreamIdleTimeoutSecs) * time.Second
	}
	set(&c.Model.MaxAnswerBytes, l.Model.MaxAnswerBytes)
	t := &c.ToolResults
	set(&t.CompressContext, l.ToolResults.CompressContext)
	set(&t.MaxBytes, l.ToolResults.MaxBytes)
	set(&t.MaxLines, l.ToolResults.MaxLines)
	set(&t.HeadBytes, l.ToolResults.HeadBytes)
	set(&t.TailBytes, l.ToolResults.TailBytes)
	set(&c.Plugins.Disabled, l.PluginsDisabled)
	set(&c.Plugins.Components, l.PluginsComps)
	set(&c.Compaction.Model, l.CompactionModel)
	set(&c.MoA.ReferenceModels, l.MoA.ReferenceModels)
	set(&c.MoA.AggregatorModel, l.MoA.AggregatorModel)
	set(&c.Subagents.MaxConcurrent, l.Subagents.MaxConcurrent)
	set(&c.Subagents.MaxDepth, l.Subagents.MaxDepth)
	set(&c.Subagents.MaxTotal, l.Subagents.MaxTotal)
	if l.Prices != nil {
		c.Prices = c.Prices.With(l.Prices)
	}
	return c
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// parse decodes one configuration file. path is used only in errors, which
// are *FileError with the line and column of the offending key.
//
// The document is decoded generically and the known keys are picked out by
// hand rather than unmarshalled into a struct: that keeps unknown keys
// harmless and lets type errors speak the file's language ("want an integer,
// got a string") instead of naming Go types.
func parse(path string, doc []byte) (settings, error) {
	var root map[string]any
	if err := toml.Unmarshal(doc, &root); err != nil {
		return settings{}, syntaxError(path, err)
	}
	var l settings
	var err error
	fail := func(key string, e error) error {
		return placeKeyError(path, doc, &keyError{key: key, err: e})
	}
	if l.DatabaseURL, err = get[string](root, keyDatabaseURL); err != nil {
		return settings{}, fail(keyDatabaseURL, err)
	}
	tr, err := get[map[string]any](root, "tool_results")
	if err != nil {
		return settings{}, fail("tool_results", err)
	}
	if tr != nil {
		t := &l.ToolResults
		if t.CompressContext, err = get[bool](*tr, "compress_context"); err != nil {
			return settings{}, fail("tool_results.compress_context", err)
		}
		for _, f := range []struct {
			key string
			dst **int
		}{
			{"max_bytes", &t.MaxBytes},
			{"max_lines", &t.MaxLines},
			{"head_bytes", &t.HeadBytes},
			{"tail_bytes", &t.TailBytes},
		} {
			if *f.dst, err = getInt(*tr, f.key); err != nil {
				return settings{}, fail("tool_results."+f.key, err)
			}
		}
	}
	pl, err := get[map[string]any](root, "plugins")
	if err != nil {
		return settings{}, fail("plugins", err)
	}
	if pl != nil {
		if l.PluginsComps, err = parseComponents(*pl); err != nil {
			return settings{}, fail("plugins.components", err)
		}
		list, err := get[[]any](*pl, "disabled")
		if err != nil {
			return settings{}, fail("plugins.disabled", err)
		}
		if list != nil {
			names := make([]string, 0, len(*list))
			for i, v := range *list {
				name, ok := v.(string)
				if !ok {
					return settings{}, fail("plugins.disabled", fmt.Errorf("item %d: want a string, got %s", i, pricing.ValueKind(v)))
				}
				names = append(names, name)
			}
			l.PluginsDisabled = &names
		}
	}
	var key string
	if key, err = parseModel(root, &l.Model); err != nil {
		return settings{}, fail(key, err)
	}
	if l.CompactionModel, key, err = parseCompaction(root); err != nil {
		return settings{}, fail(key, err)
	}
	if l.MoA, key, err = parseMoA(root); err != nil {
		return settings{}, fail(key, err)
	}
	if key, err = parseSubagents(root, &l.Subagents); err != nil {
		return settings{}, fail(key, err)
	}
	if v, ok := root["prices"]; ok {
		var kp []string
		if l.Prices, kp, err = pricing.Decode(v); err != nil {
			return settings{}, placeKeyError(path, doc, &keyError{key: pricing.KeyString(kp), path: kp, err: err})
		}
	}
	return l, nil
}

// parseComponents reads plugins.components, a list of component names.
func parseComponents(pl map[string]any) (*plugins.Components, error) {
	list, err := get[[]any](pl, "components")
	if err != nil || list == nil {
		return nil, err
	}
	names := make([]string, 0, len(*list))
	for i, v := range *list {
		name, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("item %d: want a string, got %s", i, pricing.ValueKind(v))
		}
		names = append(names, name)
	}
	cs, err := plugins.ParseComponents(names)
	if err != nil {
		return nil, err
	}
	return &cs, nil
}

// parseMoA reads the [moa] table: the mixture_of_agents tool's models. A
// table that is there must name reference models: one that names none
// would silently offer no tool. key is the dotted key at fault when it
// fails.
func parseMoA(root map[string]any) (l moaLayer, key string, err error) {
	t, err := get[map[string]any](root, "moa")
	if err != nil || t == nil {
		return moaLayer{}, "moa", err
	}
	const refs = "moa.reference_models"
	list, err := get[[]any](*t, "reference_models")
	switch {
	case err != nil:
		return moaLayer{}, refs, err
	case list == nil || len(*list) == 0:
		return moaLayer{}, refs, errors.New(`empty: name the models each question goes to, ` +
			`e.g. reference_models = ["anthropic:claude-opus-4-1", "openai:gpt-5"], or remove [moa]`)
	}
	models := make([]ModelRef, 0, len(*list))
	for i, v := range *list {
		s, ok := v.(string)
		if !ok {
			return moaLayer{}, refs, fmt.Errorf("item %d: want a string, got %s", i, pricing.ValueKind(v))
		}
		m, err := ParseModelRef(s)
		if err != nil {
			return moaLayer{}, refs, fmt.Errorf("item %d: %w", i, err)
		}
		models = append(models, m)
	}
	l.ReferenceModels = &models
	agg, err := get[string](*t, "aggregator_model")
	if err != nil {
		return moaLayer{}, "moa.aggregator_model", err
	}
	if agg != nil {
		m, err := ParseModelRef(*agg)
		if err != nil {
			return moaLayer{}, "moa.aggregator_model",
				fmt.Errorf("%w, or remove the key to aggregate with the session's model", err)
		}
		l.AggregatorModel = &m
	}
	return l, "", nil
}

// parseModel reads the [model] table: the bounds on the model's answers.
// key is the dotted key at fault when it fails.
func parseModel(root map[string]any, l *modelLayer) (key string, err error) {
	t, err := get[map[string]any](root, "model")
	if err != nil || t == nil {
		return "model", err
	}
	for _, f := range []struct {
		key string
		dst **int
	}{
		{"stream_idle_timeout_secs", &l.StreamIdleTimeoutSecs},
		{"max_answer_bytes", &l.MaxAnswerBytes},
	} {
		if *f.dst, err = getInt(*t, f.key); err != nil {
			return "model." + f.key, err
		}
		if *f.dst != nil && **f.dst <= 0 {
			return "model." + f.key, fmt.Errorf("%d: want a positive number", **f.dst)
		}
	}
	if s := l.StreamIdleTimeoutSecs; s != nil && time.Duration(*s) > maxStreamIdleTimeout/time.Second {
		return "model.stream_idle_timeout_secs",
			fmt.Errorf("%d: want at most %d seconds", *s, int64(maxStreamIdleTimeout/time.Second))
	}
	return "", nil
}

// parseSubagents reads the [subagents] table: the limits of spawn_agent.
// key is the dotted key at fault when it fails.
func parseSubagents(root map[string]any, l *subagentsLayer) (key string, err error) {
	t, err := get[map[string]any](root, "subagents")
	if err != nil || t == nil {
		return "subagents", err
	}
	for _, f := range []struct {
		key string
		dst **int
	}{
		{"max_concurrent", &l.MaxConcurrent},
		{"max_depth", &l.MaxDepth},
		{"max_total", &l.MaxTotal},
	} {
		if *f.dst, err = getInt(*t, f.key); err != nil {
			return "subagents." + f.key, err
		}
		if *f.dst != nil && **f.dst < 0 {
			return "subagents." + f.key, fmt.Errorf("%d: want 0 or more", **f.dst)
		}
	}
	return "", nil
}

// parseCompaction reads the [compaction] table: the summarizer's model.
// key is the dotted key at fault when it fails.
func parseCompaction(root map[string]any) (model *string, key string, err error) {
	c, err := get[map[string]any](root, "compaction")
	if err != nil || c == nil {
		return nil, "compaction", err
	}
	m, err := get[string](*c, "model")
	if err != nil {
		return nil, "compaction.model", err
	}
	if m != nil && strings.TrimSpace(*m) == "" {
		return nil, "compaction.model",
			errors.New("empty: name a model, or remove the key to summarize with the session's model")
	}
	return m, "", nil
}

// get returns table[key] as a T, nil when the key is absent.
func get[T any](table map[string]any, key string) (*T, error) {
	v, ok := table[key]
	if !ok {
		return nil, nil
	}
	t, ok := v.(T)
	if !ok {
		var zero T
		return nil, fmt.Errorf("want %s, got %s", pricing.ValueKind(zero), pricing.ValueKind(v))
	}
	return &t, nil
}

func getInt(table map[string]any, key string) (*int, error) {
	v, err := get[int64](table, key)
	if err != nil || v == nil {
		return nil, err
	}
	if *v < math.MinInt || *v > math.MaxInt {
		return nil, fmt.Errorf("%d does not fit in an integer", *v)
	}
	n := int(*v)
	return &n, nil
}

// syntaxError turns go-toml's error into a *FileError with its position.
func syntaxError(path string, err error) *FileError {
	fe := &FileError{Path: path, Err: err}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		fe.Line, fe.Column = de.Position()
		// The message without go-toml's "toml: " prefix reads better after
		// a file position; keep the original error for errors.As.
		fe.Err = &decodeError{msg: strings.TrimPrefix(de.Error(), "toml: "), err: de}
	}
	return fe
}

type decodeError struct {
	msg string
	err error
}

func (e *decodeError) Error() string { return e.msg }
func (e *decodeError) Unwrap() error { return e.err }

// placeKeyError turns a keyError into a *FileError located at the key in doc
// (line 0 when doc does not set the key, e.g. a limit that only clashes with
// another file's value).
func placeKeyError(path string, doc []byte, err error) error {
	fe := &FileError{Path: path, Err: err}
	var ke *keyError
	if errors.As(err, &ke) {
		fe.Key, fe.Err = ke.key, ke.err
		if ke.path == nil {
			fe.Line, fe.Column = locate(doc, strings.Split(ke.key, "."))
		}
		// A key missing from a table is placed at the table.
		for p := ke.path; len(p) > 0 && fe.Line == 0; p = p[:len(p)-1] {
			fe.Line, fe.Column = locate(doc, p)
		}
	}
	return fe
}

// locate returns the line and column where doc sets the dotted key path: the
// key of a key/value, a table header, or the enclosing inline table's key.
// It returns 0, 0 when doc does not mention the key.
func locate(doc []byte, path []string) (line, col int) {
	var p unstable.Parser
	p.Reset(doc)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyOf(e.Key())
			if isPrefix(path, table) {
				return position(&p, e.Key())
			}
		case unstable.KeyValue:
			full := append(slices.Clip(table), keyOf(e.Key())...)
			// Prefixes both ways: the key of an inline table holds the keys
			// inside it, which the parser does not expose as expressions,
			// and a dotted key (a.b = 1) is where a turned into a table.
			if isPrefix(full, path) || isPrefix(path, full) {
				return position(&p, e.Key())
			}
		}
	}
	return 0, 0
}

// isPrefix reports whether prefix is a leading part of key.
func isPrefix(prefix, key []string) bool {
	return len(prefix) <= len(key) && slices.Equal(prefix, key[:len(prefix)])
}

func keyOf(it unstable.Iterator) []string {
	var k []string
	for it.Next() {
		k = append(k, string(it.Node().Data))
	}
	return k
}

func position(p *unstable.Parser, it unstable.Iterator) (line, col int) {
	if !it.Next() {
		return 0, 0
	}
	s := p.Shape(it.Node().Raw)
	return s.Start.Line, s.Start.Column
}
