package store

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one schema migration of a backend, read from a file
// NNNN_name.up.sql. A backend applies the versions it has not applied yet in
// order, each in the transaction that records it in schema_migrations.
type Migration struct {
	Version int64
	Name    string
	SQL     string
}

// Migrations returns the migrations in directory dir of fsys (a backend's
// embedded files) in version order. A file whose name does not start with a
// positive version number, or two files of one version, are errors.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	files, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
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
		b, err := fs.ReadFile(fsys, path.Join(dir, f.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", f.Name(), err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return int(a.Version - b.Version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].Name, ms[i].Name, ms[i].Version)
		}
	}
	return ms, nil
}
