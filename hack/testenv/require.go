package testenv

import "testing"

// requireDependency ends a test that cannot run because the machine lacks an
// external dependency (server binaries, a control plane, ...). what says what
// is missing and where it was looked for; howToInstall tells a person how to
// provide it.
//
// Under -short the test is skipped, because short runs are meant to work on
// any machine. Otherwise it fails: a CI machine that lost a dependency must go
// red instead of silently passing with the integration tests skipped.
func requireDependency(t testing.TB, what, howToInstall string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration test: %s; %s", what, howToInstall)
		return // Skipf does not return on a real testing.TB
	}
	t.Fatalf("%s; %s", what, howToInstall)
}
