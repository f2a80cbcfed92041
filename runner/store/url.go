package store

import (
	"errors"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Database is a kind of session database, as a database URL names it.
type Database string

// The databases a URL can name.
const (
	SQLite   Database = "sqlite"
	Postgres Database = "postgres"
)

// URL is a database URL taken apart.
type URL struct {
	// Database is the kind of database.
	Database Database
	// Path is the SQLite database file; empty for PostgreSQL.
	Path string
	// Raw is the URL as written. For PostgreSQL it is handed to the driver
	// unchanged.
	Raw string
}

const sqliteScheme = "sqlite://"

// ErrURL is wrapped by every error from ParseURL.
var ErrURL = errors.New("want postgres://..., postgresql://..., sqlite://PATH or an absolute SQLite file path")

// ParseURL says which database a URL (database_url, --database-url)
// names. Accepted forms:
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
// key=value PostgreSQL DSN. Package store/dburl opens what it names.
func ParseURL(s string) (URL, error) {
	switch {
	case s == "":
		return URL{}, errors.Join(errors.New("the database URL is empty"), ErrURL)
	case hasPrefixFold(s, "postgres://"), hasPrefixFold(s, "postgresql://"):
		if _, err := url.Parse(s); err != nil {
			// url.Error quotes the whole input, password included.
			return URL{}, errors.Join(errors.New("malformed PostgreSQL URL"), ErrURL)
		}
		return URL{Database: Postgres, Raw: s}, nil
	case hasPrefixFold(s, sqliteScheme):
		return sqliteURL(s, s[len(sqliteScheme):])
	case hasPrefixFold(s, "sqlite:"):
		return sqliteURL(s, s[len("sqlite:"):])
	case hasPrefixFold(s, "file:"):
		path := s[len("file:"):]
		if rest, ok := strings.CutPrefix(path, "//"); ok {
			path = rest // file:///abs: an empty host
		}
		return sqliteURL(s, path)
	case filepath.IsAbs(s):
		return sqliteURL(s, s)
	default:
		return URL{}, ErrURL
	}
}

func sqliteURL(raw, path string) (URL, error) {
	if path == "" {
		return URL{}, errors.Join(errors.New("sqlite URL has no file path"), ErrURL)
	}
	if strings.ContainsAny(path, "?\x00") {
		return URL{}, errors.Join(errors.New("sqlite path contains '?' or a NUL byte"), ErrURL)
	}
	return URL{Database: SQLite, Path: path, Raw: raw}, nil
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
var kvPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`)
})

// RedactURL returns s with any password replaced by "xxxxx", for
// output and logs. It handles the URL's user info, a password query
// parameter, and key=value DSNs, and never fails: text it cannot parse is
// still scrubbed of password=... pairs.
func RedactURL(s string) string {
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
