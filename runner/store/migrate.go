package store

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// migrationFiles holds each backend's schema migrations, in
// migrations/<backend>/NNNN_name.up.sql. Versions are applied in order, each
// in the transaction that records it in schema_migrations.
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int64
	name    string
	sql     string
}

// migrations returns a backend's migrations in version order.
func migrations(backend string) ([]migration, error) {
	dir := path.Join("migrations", backend)
	files, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, f := range files {
		name, ok := strings.CutSuffix(f.Name(), ".up.sql")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version number", f.Name())
		}
		b, err := fs.ReadFile(migrationFiles, path.Join(dir, f.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", f.Name(), err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return int(a.version - b.version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}
