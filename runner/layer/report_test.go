package layer

import (
	"strings"
	"testing"
)

// TestSanitizeReason: what every loader's reasons go through before the
// report shows them.
func TestSanitizeReason(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300) // 600 bytes
	tests := []struct{ in, want string }{
		{"plain reason", "plain reason"},
		{"line one\n\tline two\x1b[31m red", "line one line two [31m red"},
		{"token=abc123 and api_key: xyz, password=hunter2;", "token=[redacted] and api_key: [redacted], password=[redacted];"},
		{"fetch https://user:s3cret@example.com/x failed", "fetch https://user:[redacted]@example.com/x failed"},
		{"uses sk-abcdefghijklmnop and ghp_abcdefghijklmnopqrstu", "uses [redacted] and [redacted]"},
		{long, strings.Repeat("é", 200) + "…"},
	}
	for _, tt := range tests {
		got := SanitizeReason(tt.in)
		if got != tt.want {
			t.Errorf("SanitizeReason(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if again := SanitizeReason(got); again != got {
			t.Errorf("SanitizeReason is not idempotent on %q: %q", got, again)
		}
	}
}

// TestIsDigest: the digests Digest writes, and nothing else.
func TestIsDigest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{Digest([]byte("x")), true},
		{Digest(nil), true},
		{"sha256:" + strings.Repeat("0", 64), true},
		{"sha256:" + strings.Repeat("0", 63), false},
		{"sha256:" + strings.Repeat("0", 65), false},
		{"sha256:" + strings.Repeat("A", 64), false}, // uppercase hex
		{"sha256:" + strings.Repeat("g", 64), false},
		{"sha512:" + strings.Repeat("0", 64), false},
		{strings.Repeat("0", 71), false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsDigest(tt.in); got != tt.want {
			t.Errorf("IsDigest(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestProblem: a problem's message names the file and the field, and a
// summary of several the first and how many more.
func TestProblem(t *testing.T) {
	t.Parallel()
	whole := Problem{Layer: "home", File: "/h/hooks.toml", Reason: "cannot parse TOML"}
	field := Problem{Layer: "home", File: "/h/hooks.toml", Field: "hooks.PreToolUse[0].matcher", Reason: "not a regular expression"}
	if got, want := whole.Error(), "/h/hooks.toml: cannot parse TOML"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := field.Error(), "/h/hooks.toml: hooks.PreToolUse[0].matcher: not a regular expression"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := Summary([]Problem{whole}), "cannot parse TOML"; got != want {
		t.Errorf("Summary of one = %q, want %q", got, want)
	}
	if got, want := Summary([]Problem{field, whole, whole}), "hooks.PreToolUse[0].matcher: not a regular expression (and 2 more problems)"; got != want {
		t.Errorf("Summary of three = %q, want %q", got, want)
	}
}
