// Package executortest gives tests a real Local executor that is closed
// when the test ends, for the packages whose tools, hooks and servers run
// commands through one.
//
// It lives apart from hack/testenv because the executor's own tests import
// hack/testenv, which therefore must not import the executor. It is
// imported by tests only.
package executortest

import (
	"context"
	"testing"

	"github.com/aerie-run/aerie/runner/executor"
)

// NewLocal returns a Local executor on dir with opts, closed at the end of
// the test; a failure to close fails the test.
func NewLocal(t testing.TB, dir string, opts executor.Options) *executor.Local {
	t.Helper()
	l, err := executor.NewLocal(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Errorf("close the executor: %v", err)
		}
	})
	return l
}
