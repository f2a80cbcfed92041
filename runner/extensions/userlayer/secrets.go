package userlayer

import (
	"bytes"
	"math"
	"regexp"
	"sync"
)

// Secret is a credential found in an artifact's content.
type Secret struct {
	// Kind names the credential's format ("an Anthropic API key").
	Kind string
	// Line is the 1-based line it starts on.
	Line int
}

// secretPattern is one credential format. check, when set, must also
// accept the match: it weeds out words that merely share a prefix.
type secretPattern struct {
	kind  string
	re    *regexp.Regexp
	check func(match []byte) bool
}

// secretPatterns are the credential formats an artifact must not carry.
// An artifact written by the agent ends up in every later session's
// prompt or runs as a command; a key pasted into it would leak into
// transcripts, reports and tool subprocesses. The list covers the keys a
// coding agent most often holds (model APIs, forges, clouds, chat) and
// private keys in PEM form; the last pattern catches a long random value
// assigned to a secret-sounding name. They are compiled on first use: only
// extension_manage's writes need them, and compiling them cost every start
// of aerie about a millisecond.
var secretPatterns = sync.OnceValue(func() []secretPattern {
	return []secretPattern{
		{kind: "a private key (PEM)", re: regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`)},
		{kind: "an Anthropic API key", re: regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{16,}`)},
		{
			kind:  "an OpenAI API key",
			re:    regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`),
			check: randomish,
		},
		{kind: "a GitHub token", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})`)},
		{kind: "a GitLab token", re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`)},
		{kind: "an AWS access key id", re: regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b`)},
		{
			kind: "an AWS secret access key",
			re:   regexp.MustCompile(`(?i)aws_secret_access_key["']?\s*[:=]\s*["']?[A-Za-z0-9/+]{40}\b`),
		},
		{kind: "a Slack token", re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`)},
		{kind: "a Google API key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`)},
		{kind: "a Stripe secret key", re: regexp.MustCompile(`\b[rs]k_live_[0-9A-Za-z]{20,}`)},
		{
			kind: "a JSON web token",
			re:   regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}`),
		},
		{
			kind:  "a password or token in a URL",
			re:    regexp.MustCompile(`\b[a-z][a-z0-9+.-]*://[^\s:/@'"]+:[^\s@/'"$<{]{6,}@`),
			check: notPlaceholder,
		},
		{
			kind: "a secret assigned to a credential name",
			re: regexp.MustCompile(
				`(?i)(?:api[_-]?key|secret|token|passw(?:or)?d|auth)[a-z0-9_-]*` + // the credential name
					`["']?\s*[:=]\s*["']?([A-Za-z0-9_+/=.-]{20,})`, // then what is assigned to it
			),
			check: func(m []byte) bool { return randomish(assigned().FindSubmatch(m)[1]) },
		},
	}
})

// assigned re-finds the value of the last pattern inside its match.
var assigned = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)[:=]\s*["']?([A-Za-z0-9_+/=.-]{20,})`)
})

// genericPatterns counts the patterns at the end of secretPatterns that
// match by context (a URL's password, a value assigned to a credential
// name) rather than by a key's own format; a key found by its format is
// named by it, even where the line also assigns it to a name.
const genericPatterns = 2

// FindSecret returns the first credential in content, if any.
func FindSecret(content []byte) (Secret, bool) {
	patterns := secretPatterns()
	specific := len(patterns) - genericPatterns
	if s, ok := findFirst(content, patterns[:specific]); ok {
		return s, true
	}
	return findFirst(content, patterns[specific:])
}

// findFirst returns the earliest match of any of patterns.
func findFirst(content []byte, patterns []secretPattern) (Secret, bool) {
	best := Secret{}
	at := -1
	for _, p := range patterns {
		for _, loc := range p.re.FindAllIndex(content, -1) {
			if p.check != nil && !p.check(content[loc[0]:loc[1]]) {
				continue
			}
			if at < 0 || loc[0] < at {
				at, best = loc[0], Secret{Kind: p.kind}
			}
			break
		}
	}
	if at < 0 {
		return Secret{}, false
	}
	best.Line = 1 + bytes.Count(content[:at], []byte("\n"))
	return best, true
}

// randomish reports whether v looks generated rather than written: it
// mixes letters and digits and its characters are spread out (Shannon
// entropy over 3 bits each). "sk-learn-compatible-estimators" is prose;
// "sk-9fQ2…" is a key.
func randomish(v []byte) bool {
	var letters, digits bool
	counts := map[byte]int{}
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9':
			digits = true
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letters = true
		}
		counts[c]++
	}
	if !letters || !digits {
		return false
	}
	var h float64
	for _, n := range counts {
		p := float64(n) / float64(len(v))
		h -= p * math.Log2(p)
	}
	return h > 3
}

// notPlaceholder accepts a URL password that is not a template
// (user:pass@, user:PASSWORD@, user:xxxx@).
func notPlaceholder(m []byte) bool {
	i := bytes.LastIndexByte(m, ':')
	pw := bytes.ToLower(m[i+1 : len(m)-1])
	switch string(pw) {
	case "password", "passwd", "secret", "changeme", "example":
		return false
	}
	return len(bytes.Trim(pw, "x*.")) > 0
}
