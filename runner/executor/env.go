package executor

import (
	"slices"
	"strings"
)

// Environ builds the environment of a tool command from base (normally the
// runner's os.Environ()). It keeps only the variables on the allow-list —
// the defaults (PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE, LC_*,
// TERM, COLORTERM, NO_COLOR, TZ, TMPDIR, SSL_CERT_FILE, SSL_CERT_DIR) and
// the names in pass, where "NAME_*" matches a prefix — and never one that
// Secret reports or a dynamic loader variable (LD_*), whatever pass says. Then it applies set: KEY=VALUE
// entries added as given, overriding (a secret set explicitly is the
// caller's decision). The result is sorted, one entry per name.
//
// An allow-list rather than a deny-list: the runner holds the model API
// key and the database DSN, and a variable the list does not know is more
// likely a secret aerie did not anticipate than something a tool cannot
// do without.
func Environ(base, pass, set []string) []string {
	env := make(map[string]string)
	for _, kv := range base {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" || Secret(name) || loaderVariable(name) {
			continue
		}
		if _, dup := env[name]; dup {
			continue // the first one wins, as in getenv(3)
		}
		if passedByDefault(name) || matchAny(name, pass) {
			env[name] = value
		}
	}
	for _, kv := range set {
		if name, value, ok := strings.Cut(kv, "="); ok && name != "" {
			env[name] = value
		}
	}
	out := make([]string, 0, len(env))
	for name, value := range env {
		out = append(out, name+"="+value)
	}
	slices.Sort(out)
	return out
}

// passedByDefault reports whether name is on the default allow-list: what
// programs need to find each other, speak the user's language and reach
// TLS roots.
func passedByDefault(name string) bool {
	switch name {
	case "PATH", "HOME", "USER", "LOGNAME", "SHELL",
		"LANG", "LANGUAGE",
		"TERM", "COLORTERM", "NO_COLOR",
		"TZ", "TMPDIR",
		"SSL_CERT_FILE", "SSL_CERT_DIR":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// loaderVariable reports whether name is one of the dynamic loader's
// variables (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...), which Environ
// never passes through from the base environment either: whatever set
// them in the runner's environment would otherwise load its code into
// every tool. A tool that needs one gets it set explicitly.
func loaderVariable(name string) bool { return strings.HasPrefix(name, "LD_") }

// Secret reports whether the variable name is one Environ never passes
// through from the base environment, even when asked to by name: aerie's
// own settings (AERIE_*, which include its database DSN), the model
// providers' credentials (ANTHROPIC_*, OPENAI_*, *_API_KEY), and database
// connection strings and passwords (DATABASE_URL, PGPASSWORD, PGPASSFILE).
func Secret(name string) bool {
	switch name {
	case "DATABASE_URL", "PGPASSWORD", "PGPASSFILE":
		return true
	}
	for _, prefix := range []string{"AERIE_", "ANTHROPIC_", "OPENAI_"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return strings.HasSuffix(name, "_API_KEY")
}

// matchAny reports whether name matches one of patterns: a name, or a
// prefix followed by *.
func matchAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}
