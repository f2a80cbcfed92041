package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// ChromiumEnv names a Chromium binary to drive in browser tests, instead
// of the Debian package's.
const ChromiumEnv = "AERIE_CHROMIUM"

// Chromium returns the path of the Chromium binary that browser tests
// drive: $AERIE_CHROMIUM, else chromium (the Debian package's
// /usr/bin/chromium) on $PATH. Without one the test fails (or, under
// -short, is skipped) saying how to install it.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(ChromiumEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("$%s=%s: %v; point it at a Chromium binary or unset it", ChromiumEnv, p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	requireDependency(t, "the browser tests need Chromium, and there is no chromium on $PATH",
		"install it with `apt-get install -y chromium` (Debian), or set $"+ChromiumEnv+" to a Chromium binary")
	return ""
}
