package config

import (
	"errors"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Backend is a kind of session store.
type Backend string

// The backends database_url can select.
const (
	SQLite   Backend = "sqlite"
	Postgres Backend = "postgres"
)

// Database is a database_url taken apart.
type Database struct {
	// Backend is the kind of store.
	Backend Backend
	// Path is the SQLite database file; empty for PostgreSQL.
	Path string
	// URL is database_url as written. For PostgreSQL it is handed to the
	// driver unchanged.
	URL string
}

const sqliteScheme = "sqlite://"

// ErrDatabaseURL is wrapped by every error from ParseDatabaseURL.
var ErrDatabaseURL = errors.New("want postgres://..., postgresql://..., sqlite://PATH or an absolute SQLite file path")

// ParseDatabaseURL says which store a database_url names. Accepted forms:
//
//	postgres://user:password@host:5432/db?sslmode=disable   (or postgresql://)
//	sqlite:///absolute/path/sessions.db                     (sqlite:// + path)
//	sqlite:relative/or/absolute/path.db
//	file:/absolute/path.db, file:///absolute/path.db
//	/absolute/path/sessions.db                              (a bare absolute path is SQLite)
//
// Everything after "sqlite://" or "sqlite:" is the file path, taken
// literally, so paths need no escaping; a path may not contain '?', which
// would read as driver options. A relative SQLite path is relative to the
// working directory; setup always writes absolute ones. A bare relative path
// is refused because it cannot be told apart from a mistyped URL or a
// key=value PostgreSQL DSN. These forms are a subset of what
// runner/store/dburl's Open accepts, so a value that passes here also opens
// there.
func ParseDatabaseURL(s string) (Database, error) {
	switch {
	case s == "":
		return Database{}, errors.Join(errors.New("database_url is empty"), ErrDatabaseURL)
	case hasPrefixFold(s, "postgres://"), hasPrefixFold(s, "postgresql://"):
		if _, err := url.Parse(s); err != nil {
			// url.Error quotes the whole input, password included.
			return Database{}, errors.Join(errors.New("malformed PostgreSQL URL"), ErrDatabaseURL)
		}
		return Database{Backend: Postgres, URL: s}, nil
	case hasPrefixFold(s, sqliteScheme):
		return sqliteDatabase(s, s[len(sqliteScheme):])
	case hasPrefixFold(s, "sqlite:"):
		return sqliteDatabase(s, s[len("sqlite:"):])
	case hasPrefixFold(s, "file:"):
		path := s[len("file:"):]
		if rest, ok := strings.CutPrefix(path, "//"); ok {
			path = rest // file:///abs: an empty host
		}
		return sqliteDatabase(s, path)
	case filepath.IsAbs(s):
		return sqliteDatabase(s, s)
	default:
		return Database{}, ErrDatabaseURL
	}
}

func sqliteDatabase(raw, path string) (Database, error) {
	if path == "" {
		return Database{}, errors.Join(errors.New("sqlite URL has no file path"), ErrDatabaseURL)
	}
	if strings.ContainsAny(path, "?\x00") {
		return Database{}, errors.Join(errors.New("sqlite path contains '?' or a NUL byte"), ErrDatabaseURL)
	}
	return Database{Backend: SQLite, Path: path, URL: raw}, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// SQLiteURL returns the database_url for a SQLite file.
func SQLiteURL(path string) string {
	return sqliteScheme + path
}

// kvPassword matches password=... in key=value DSNs and query strings,
// quoted or not.
var kvPassword = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`) })

// RedactDatabaseURL returns s with any password replaced by "xxxxx", for
// output and logs. It handles the URL's user info, a password query
// parameter, and key=value DSNs, and never fails: text it cannot parse is
// still scrubbed of password=... pairs.
func RedactDatabaseURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && !hasPrefixFold(s, "sqlite:") && !hasPrefixFold(s, "file:") {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	if hasPrefixFold(s, "sqlite:") || hasPrefixFold(s, "file:") || filepath.IsAbs(s) {
		return s // a file path holds no credentials
	}
	// Unparsable URL: if it looks like user:password@host, hide what sits
	// between the last ':' of the user info and the '@'.
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if c := strings.Index(rest[:at], ":"); c >= 0 {
				s = s[:i+3] + rest[:c+1] + "xxxxx" + rest[at:]
			}
		}
	}
	return kvPassword().ReplaceAllString(s, "${1}xxxxx")
}
