package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/aerie-run/aerie/runner/process"
)

// RunSubreaped runs m's tests with the test binary as a child subreaper, as
// aerie's executor is, and exits with their status. Orphans of the process
// groups the tests tear down come back to the test binary and are reaped, so
// a process a test checks for in /proc is really gone, not a zombie of init's.
// The Reaper is stored in *reaper before the tests run, for executors that
// must leave the exit status of their own children alone.
//
//	func TestMain(m *testing.M) { testenv.RunSubreaped(m, &testReaper) }
func RunSubreaped(m *testing.M, reaper **process.Reaper) {
	r, stop, err := process.Subreap()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*reaper = r
	subreaper = r
	code := m.Run()
	stop()
	os.Exit(code)
}

// subreaper is the Reaper of a test binary that RunSubreaped made a child
// subreaper. The commands this package runs to their end (kubectl, initdb)
// must then be started through it, or a reaping pass could take their exit
// status before their Wait does.
var subreaper *process.Reaper

// runCmd runs cmd to its end, through the subreaper when there is one.
func runCmd(cmd *exec.Cmd) error {
	if subreaper == nil {
		return cmd.Run()
	}
	if _, err := subreaper.Start(cmd, process.NewID()); err != nil {
		return err
	}
	return subreaper.Wait(cmd)
}

// CombinedOutput is cmd.CombinedOutput through the subreaper when there
// is one, and output cmd.Output (see runCmd).
func CombinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := runCmd(cmd)
	return b.Bytes(), err
}

func output(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout = &b
	err := runCmd(cmd)
	return b.Bytes(), err
}
