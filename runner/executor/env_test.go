package executor

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEnviron(t *testing.T) {
	t.Parallel()
	base := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/agent",
		"USER=agent",
		"LANG=en_US.UTF-8",
		"LC_ALL=C.UTF-8",
		"LC_CTYPE=C.UTF-8",
		"TERM=xterm-256color",
		"TZ=Europe/Paris",
		"TMPDIR=/tmp",
		"ANTHROPIC_API_KEY=sk-ant-secret",
		"ANTHROPIC_BASE_URL=https://proxy",
		"OPENAI_API_KEY=sk-secret",
		"GEMINI_API_KEY=secret",
		"AERIE_DATABASE_URL=postgres://u:secret@db/aerie",
		"AERIE_HOME=/home/agent/.aerie",
		"DATABASE_URL=postgres://u:secret@db/aerie",
		"PGPASSWORD=secret",
		"KUBERNETES_SERVICE_HOST=10.0.0.1",
		"GOPATH=/go",
		"GOFLAGS=-mod=mod",
		"LD_PRELOAD=/tmp/inject.so",
		"LD_LIBRARY_PATH=/tmp/libs",
		"LD_AUDIT=/tmp/audit.so",
		"PATH=/second/path/ignored",
		"MALFORMED",
		"=nameless",
	}
	defaults := []string{
		"HOME=/home/agent",
		"LANG=en_US.UTF-8",
		"LC_ALL=C.UTF-8",
		"LC_CTYPE=C.UTF-8",
		"PATH=/usr/bin:/bin",
		"TERM=xterm-256color",
		"TMPDIR=/tmp",
		"TZ=Europe/Paris",
		"USER=agent",
	}
	tests := []struct {
		name      string
		pass, set []string
		want      []string
	}{
		{"defaults only", nil, nil, defaults},
		{"pass by name and prefix", []string{"GOPATH", "GO*"}, nil,
			append([]string{"GOFLAGS=-mod=mod", "GOPATH=/go"}, defaults...)},
		{"secrets never pass", []string{"ANTHROPIC_API_KEY", "ANTHROPIC_*", "OPENAI_*", "AERIE_*", "*", "DATABASE_URL", "PGPASSWORD", "GEMINI_API_KEY"}, nil,
			// "*" passes everything that is not a secret.
			append([]string{"GOFLAGS=-mod=mod", "GOPATH=/go", "KUBERNETES_SERVICE_HOST=10.0.0.1"}, defaults...)},
		{"loader variables never pass", []string{"LD_PRELOAD", "LD_*"}, nil, defaults},
		{"a loader variable set explicitly", nil, []string{"LD_LIBRARY_PATH=/opt/lib"},
			append([]string{"LD_LIBRARY_PATH=/opt/lib"}, defaults...)},
		{"set adds and overrides", nil, []string{"TERM=dumb", "CI=true", "GITHUB_TOKEN=explicit", "bad"},
			[]string{"CI=true", "GITHUB_TOKEN=explicit", "HOME=/home/agent", "LANG=en_US.UTF-8", "LC_ALL=C.UTF-8", "LC_CTYPE=C.UTF-8",
				"PATH=/usr/bin:/bin", "TERM=dumb", "TMPDIR=/tmp", "TZ=Europe/Paris", "USER=agent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Environ(base, tt.pass, tt.set)
			want := slices.Sorted(slices.Values(tt.want))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Environ mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"ANTHROPIC_API_KEY":  true,
		"ANTHROPIC_BASE_URL": true,
		"OPENAI_API_KEY":     true,
		"OPENAI_ORG_ID":      true,
		"MISTRAL_API_KEY":    true,
		"AERIE_DATABASE_URL": true,
		"AERIE_HOME":         true,
		"DATABASE_URL":       true,
		"PGPASSWORD":         true,
		"PGPASSFILE":         true,
		"PATH":               false,
		"HOME":               false,
		"GITHUB_TOKEN":       false,
		"API_KEYS_DOC":       false,
	} {
		if got := Secret(name); got != want {
			t.Errorf("Secret(%q) = %v, want %v", name, got, want)
		}
	}
}
