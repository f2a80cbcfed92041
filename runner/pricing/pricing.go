// Package pricing turns a model's token usage into money: a table of
// prices per model (the bundled prices.toml, overridden by the
// configuration's [prices."model"] tables) and Priced, a model whose
// responses carry their cost, so that the ledger of a session tree can
// count it against a cost budget.
package pricing

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/aerie-run/aerie/runner/provider"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	// Input is an uncached input token's price.
	Input float64
	// Output is a generated token's price, reasoning included.
	Output float64
	// CacheRead is an input token read from the prompt cache.
	CacheRead float64
	// CacheWrite is an input token written to the prompt cache.
	CacheWrite float64
}

// Cost is what the usage of one response cost in US dollars. The input
// tokens provider.Usage counts include those read from and written to the
// cache; they are priced as such and the rest as uncached input.
func (p Price) Cost(u provider.Usage) float64 {
	plain := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	c := float64(plain)*p.Input + float64(max(u.OutputTokens, 0))*p.Output +
		float64(max(u.CacheReadTokens, 0))*p.CacheRead + float64(max(u.CacheWriteTokens, 0))*p.CacheWrite
	return c / 1e6
}

// Table holds the prices of models, by lowercased model name.
type Table map[string]Price

// Lookup returns the price of model: by its name as given (lowercased),
// then by the names aerie's model tables know it by (without a routing
// prefix or a date suffix, see provider.ModelKeys).
func (t Table) Lookup(model string) (Price, bool) {
	keys := append([]string{strings.ToLower(model)}, provider.ModelKeys(model)...)
	for _, k := range keys {
		if p, ok := t[k]; ok {
			return p, true
		}
	}
	return Price{}, false
}

// With returns a new table: t with the prices over sets replaced or
// added, model by model.
func (t Table) With(over Table) Table {
	out := make(Table, len(t)+len(over))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

//go:embed prices.toml
var bundledTOML []byte

var bundled = sync.OnceValue(func() Table {
	t, err := Parse(bundledTOML)
	if err != nil {
		panic("pricing: the bundled prices.toml: " + err.Error())
	}
	return t
})

// Bundled returns the prices aerie ships with (a copy: change it freely).
func Bundled() Table { return bundled().With(nil) }

// MaxPrice bounds a price, in US dollars per million tokens, so that a
// slip of the decimal point is caught rather than charged.
const MaxPrice = 10_000

// Parse reads the [prices] table of a TOML document.
func Parse(doc []byte) (Table, error) {
	var root map[string]any
	if err := toml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	t, key, err := Decode(root["prices"])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeyString(key), err)
	}
	return t, nil
}

// Decode reads the value of a decoded TOML document's prices key: a table
// of [prices."model"] tables with input and output (required), cache_read
// and cache_write (the input price when left out). Other keys are ignored,
// as the configuration's unknown keys are. nil is an empty table. On
// failure key is the path of the key at fault (prices, the model, the
// field).
func Decode(v any) (t Table, key []string, err error) {
	if v == nil {
		return Table{}, nil, nil
	}
	models, ok := v.(map[string]any)
	if !ok {
		return nil, []string{"prices"}, fmt.Errorf(`want a table of [prices."model"] tables, got %s`, ValueKind(v))
	}
	t = make(Table, len(models))
	names := make([]string, 0, len(models))
	for name := range models {
		names = append(names, name)
	}
	slices.Sort(names) // the first error is the same every time
	for _, name := range names {
		key := []string{"prices", name}
		lower := strings.ToLower(strings.TrimSpace(name))
		if lower == "" {
			return nil, key, errors.New(`empty model name: write [prices."model-name"]`)
		}
		if _, dup := t[lower]; dup {
			return nil, key, fmt.Errorf("model %q is priced twice (names are not case-sensitive)", name)
		}
		p, field, err := decodePrice(models[name])
		if err != nil {
			if field != "" {
				key = append(key, field)
			}
			return nil, key, err
		}
		t[lower] = p
	}
	return t, nil, nil
}

func decodePrice(v any) (p Price, field string, err error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Price{}, "", fmt.Errorf("want a table with input and output prices, got %s", ValueKind(v))
	}
	var cacheRead, cacheWrite *float64
	for _, f := range []struct {
		name     string
		required bool
		dst      **float64
	}{
		{"input", true, nil}, {"output", true, nil},
		{"cache_read", false, &cacheRead}, {"cache_write", false, &cacheWrite},
	} {
		x, ok, err := number(m, f.name)
		switch {
		case err != nil:
			return Price{}, f.name, err
		case !ok && f.required:
			return Price{}, f.name, errors.New("missing: give the price in US dollars per million tokens")
		case !ok:
			continue
		}
		switch f.name {
		case "input":
			p.Input = x
		case "output":
			p.Output = x
		default:
			*f.dst = &x
		}
	}
	p.CacheRead, p.CacheWrite = p.Input, p.Input
	if cacheRead != nil {
		p.CacheRead = *cacheRead
	}
	if cacheWrite != nil {
		p.CacheWrite = *cacheWrite
	}
	return p, "", nil
}

// number reads m[key] as a price: a TOML integer or float from 0 to
// MaxPrice.
func number(m map[string]any, key string) (float64, bool, error) {
	v, ok := m[key]
	if !ok {
		return 0, false, nil
	}
	var x float64
	switch n := v.(type) {
	case int64:
		x = float64(n)
	case float64:
		x = n
	default:
		return 0, false, fmt.Errorf("want a number (US dollars per million tokens), got %s", ValueKind(v))
	}
	if math.IsNaN(x) || x < 0 || x > MaxPrice {
		return 0, false, fmt.Errorf("%v is out of range; use 0 to %d US dollars per million tokens", x, MaxPrice)
	}
	return x, true, nil
}

// ValueKind names the kind of a value decoded from TOML, as an error
// about a value of the wrong kind says it: "a string", "a table", ...
// Every reader of TOML documents of this program uses it, so that they all
// say it alike.
func ValueKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "a date or time"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// KeyString writes a key path as TOML does: prices."gpt-4.1".input.
func KeyString(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == "" {
			parts[i] = p
		} else {
			parts[i] = fmt.Sprintf("%q", p)
		}
	}
	return strings.Join(parts, ".")
}

// Model is what Priced wraps; every provider.Provider is one.
type Model interface {
	Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error]
}

// Priced returns m with the cost of each response, at price p, in the
// usage of its finish part.
func Priced(m Model, p Price) Model { return priced{m: m, p: p} }

type priced struct {
	m Model
	p Price
}

func (pm priced) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Part, error] {
	return func(yield func(provider.Part, error) bool) {
		for part, err := range pm.m.Stream(ctx, req) {
			if err == nil && part.Type == provider.PartFinish {
				part.Usage.CostUSD = pm.p.Cost(part.Usage)
			}
			if !yield(part, err) {
				return
			}
		}
	}
}
