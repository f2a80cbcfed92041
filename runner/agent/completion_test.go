package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCompletionError(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes, two per rune
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"exit status 2", "exit status 2"},
		{"first line\nsecond line", "first line"},
		{long, strings.Repeat("é", 100)},
	} {
		got := CompletionError(tc.in)
		if got != tc.want {
			t.Errorf("CompletionError(%.20q) = %.20q (%d bytes), want %.20q", tc.in, got, len(got), tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("CompletionError(%.20q) cut a rune: %q", tc.in, got)
		}
	}
}
