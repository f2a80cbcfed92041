// Package dburl opens the session store a database URL names, with the
// backend it names: PostgreSQL (store/postgres) or a SQLite file
// (store/sqlite). It is the one place that links both drivers; a program
// that knows its backend opens it directly.
package dburl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/postgres"
	"github.com/aerie-run/aerie/runner/store/sqlite"
)

// Open opens the store a database URL names and brings its schema up to
// date:
//
//	postgres://... or postgresql://...  PostgreSQL (the URL goes to pgx as is)
//	sqlite://PATH, sqlite:PATH          SQLite file at PATH
//	file:PATH                           SQLite file at PATH
//	PATH                                SQLite file at PATH
//
// A connection or migration failure is an error, and nothing stays open.
func Open(ctx context.Context, url string) (*store.DB, error) {
	backend, target, err := parseURL(url)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if backend == backendPostgres {
		return postgres.Open(ctx, target)
	}
	return sqlite.Open(ctx, target)
}

type backend int

const (
	backendSQLite backend = iota
	backendPostgres
)

// parseURL says which backend url names and what to hand it: the URL itself
// for PostgreSQL, the file path for SQLite.
func parseURL(url string) (backend, string, error) {
	hasPrefix := func(prefix string) bool {
		return len(url) >= len(prefix) && strings.EqualFold(url[:len(prefix)], prefix)
	}
	var path string
	switch {
	case url == "":
		return 0, "", errors.New("empty database URL")
	case hasPrefix("postgres://"), hasPrefix("postgresql://"):
		return backendPostgres, url, nil
	case hasPrefix("sqlite://"):
		path = url[len("sqlite://"):]
	case hasPrefix("sqlite:"):
		path = url[len("sqlite:"):]
	case hasPrefix("file:"):
		path = url[len("file:"):]
		// file: URLs may also spell an absolute path with an empty host.
		if rest, ok := strings.CutPrefix(path, "//"); ok {
			path = rest
		}
	case strings.Contains(url, "://"):
		scheme, _, _ := strings.Cut(url, "://")
		return 0, "", fmt.Errorf("unsupported database URL scheme %q: want postgres, postgresql, sqlite or file", scheme)
	default:
		path = url
	}
	if path == "" {
		return 0, "", errors.New("SQLite database URL without a file path")
	}
	if strings.ContainsAny(path, "?\x00") {
		// Pragmas are fixed by the store, and a query would otherwise be
		// taken for part of the file name.
		return 0, "", errors.New("SQLite database URL must be a plain file path, without query parameters")
	}
	return backendSQLite, path, nil
}
