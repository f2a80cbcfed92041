package userlayer

import (
	"strings"
	"testing"
)

func TestFindSecret(t *testing.T) {
	t.Parallel()
	// Built from parts so that the repository holds nothing a scanner
	// would take for a real key.
	key := func(parts ...string) string { return strings.Join(parts, "") }
	for _, tc := range []struct {
		name, content string
		kind          string // "" for none
		line          int
	}{
		{name: "anthropic", content: "# notes\nexport KEY=" + key("sk-", "ant-", "api03-", "Xy7kQ9mZ2pL4vB8nR1tW") + "\n", kind: "an Anthropic API key", line: 2},
		{name: "openai", content: "use " + key("sk-", "proj-", "a8Fk2Lm9Qz7Rt3Vb6Np1Xw4"), kind: "an OpenAI API key", line: 1},
		{name: "openai legacy", content: key("sk-", "9fQ2xT7bK1mZ8vR3nL6wP4yH"), kind: "an OpenAI API key", line: 1},
		{name: "github classic", content: "token: " + key("ghp_", "1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ"), kind: "a GitHub token", line: 1},
		{name: "github fine-grained", content: key("github_pat_", "11ABCDEFG0123456789_abcdefghijklmnopqrstuv"), kind: "a GitHub token", line: 1},
		{name: "gitlab", content: key("glpat-", "xY7kQ9mZ2pL4vB8nR1tW"), kind: "a GitLab token", line: 1},
		{name: "aws key id", content: "\n\n" + key("AKIA", "IOSFODNN7EXAMPLE"), kind: "an AWS access key id", line: 3},
		{name: "aws secret", content: "aws_secret_access_key = " + key("wJalrXUtnFEMI/K7MDENG/", "bPxRfiCYEXAMPLEKEY"), kind: "an AWS secret access key", line: 1},
		{name: "slack", content: key("xox", "b-", "123456789012-abcdefghij"), kind: "a Slack token", line: 1},
		{name: "google", content: key("AIza", "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"), kind: "a Google API key", line: 1},
		{name: "stripe", content: key("sk_", "live_", "4eC39HqLyjWDarjtT1zdp7dc"), kind: "a Stripe secret key", line: 1},
		{name: "pem", content: "---\n" + key("-----BEGIN ", "RSA PRIVATE KEY-----") + "\nMIIE\n", kind: "a private key (PEM)", line: 2},
		{name: "openssh pem", content: key("-----BEGIN ", "OPENSSH PRIVATE KEY-----"), kind: "a private key (PEM)", line: 1},
		{name: "jwt", content: key("eyJ", "hbGciOiJIUzI1NiJ9", ".eyJ", "zdWIiOiIxMjM0NTY3ODkwIn0", ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"), kind: "a JSON web token", line: 1},
		{name: "url password", content: "postgres://aerie:" + key("s3cr3t", "Pa55") + "@db:5432/aerie", kind: "a password or token in a URL", line: 1},
		{name: "assigned", content: "API_TOKEN=\"" + key("Zx81kQp0", "Lm27Rt9vBn4W") + "\"", kind: "a secret assigned to a credential name", line: 1},
		{name: "first of two", content: key("AKIA", "IOSFODNN7EXAMPLE") + "\n" + key("-----BEGIN ", "PRIVATE KEY-----"), kind: "an AWS access key id", line: 1},

		{name: "prose", content: "Use sk-learn-compatible-estimators and the github token from the environment."},
		{name: "env reference", content: "command = [\"curl\", \"-H\", \"Authorization: Bearer $GITHUB_TOKEN\"]"},
		{name: "placeholder url", content: "postgres://user:password@localhost/db and https://user:${PASSWORD}@host/"},
		{name: "url without password", content: "postgres://aerie@db:5432/aerie"},
		{name: "public key", content: "-----BEGIN PUBLIC KEY-----"},
		{name: "word assigned", content: "token = \"the-name-of-the-variable-holding-it\""},
		{name: "digest", content: "sha256 = \"9f2c4b7e1a0d3f5c6b8e9a1d2c3f4b5a6e7d8c9b0a1f2e3d4c5b6a7980a1b2c3\""},
		{name: "empty", content: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, ok := FindSecret([]byte(tc.content))
			if ok != (tc.kind != "") || s.Kind != tc.kind || s.Line != tc.line {
				t.Errorf("FindSecret = %+v, %v; want %q on line %d", s, ok, tc.kind, tc.line)
			}
		})
	}
}

func FuzzFindSecret(f *testing.F) {
	f.Add("sk-ant-api03-Xy7kQ9mZ2pL4vB8nR1tW")
	f.Add("postgres://u:p4ssw0rdX@h/d")
	f.Add("token = \"abcdefghijklmnopqrstuvwxyz0123456789\"")
	f.Fuzz(func(t *testing.T, s string) {
		sec, ok := FindSecret([]byte(s))
		if ok && (sec.Line < 1 || sec.Line > strings.Count(s, "\n")+1 || sec.Kind == "") {
			t.Fatalf("FindSecret(%q) = %+v", s, sec)
		}
	})
}
