package pluginroot

import (
	"maps"
	"slices"
	"testing"
)

func TestExpand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		names []string
		want  string
	}{
		{"${AERIE_PLUGIN_ROOT}/bin ${OPENVAALA_PLUGIN_ROOT}", Native, "/p/bin /p"},
		{"${CLAUDE_PLUGIN_ROOT}/x", Native, "${CLAUDE_PLUGIN_ROOT}/x"},
		{"${CLAUDE_PLUGIN_ROOT}/x $AERIE_PLUGIN_ROOT ${HOME}", Claude, "/p/x $AERIE_PLUGIN_ROOT ${HOME}"},
		{"no placeholder", Claude, "no placeholder"},
	} {
		if got := Expand(tc.in, "/p", tc.names); got != tc.want {
			t.Errorf("Expand(%q, %v) = %q, want %q", tc.in, tc.names, got, tc.want)
		}
	}
	// A root that looks like a placeholder is not expanded again.
	if got := Expand("${AERIE_PLUGIN_ROOT}", "${OPENVAALA_PLUGIN_ROOT}", Native); got != "${OPENVAALA_PLUGIN_ROOT}" {
		t.Errorf("root expanded again: %q", got)
	}
}

func TestEnvironAndEnv(t *testing.T) {
	t.Parallel()
	if got, want := Environ("/p", Claude), []string{
		"CLAUDE_PLUGIN_ROOT=/p", "AERIE_PLUGIN_ROOT=/p", "OPENVAALA_PLUGIN_ROOT=/p",
	}; !slices.Equal(got, want) {
		t.Errorf("Environ = %q, want %q", got, want)
	}
	got := Env(map[string]string{"AERIE_PLUGIN_ROOT": "/mine", "CFG": "${AERIE_PLUGIN_ROOT}/c"}, "/p", Native)
	want := map[string]string{"AERIE_PLUGIN_ROOT": "/mine", "OPENVAALA_PLUGIN_ROOT": "/p", "CFG": "/p/c"}
	if !maps.Equal(got, want) {
		t.Errorf("Env = %v, want %v", got, want)
	}
	if args := ExpandEach(nil, "/p", Native); args == nil || len(args) != 0 {
		t.Errorf("ExpandEach(nil) = %#v, want an empty slice", args)
	}
}
