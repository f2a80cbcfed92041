package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSweepLedgers: the groups in the ledger of an owner that died (its
// lock released without Close, as SIGKILL releases it) are ended by a
// sweep and the ledger removed; a live owner's ledger, and its group, are
// left alone. The fault suite's kill loop found the groups of killed runs
// outliving their sessions.
func TestSweepLedgers(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	start := func(l *Ledger) (*exec.Cmd, Group) {
		cmd := exec.Command("sh", "-c", "sleep 30 & exec sleep 30")
		g, err := Start(cmd, NewID())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = Teardown(t.Context(), g, time.Second); _ = cmd.Wait() })
		if err := l.Add(g, "sleep 30", home, time.Now()); err != nil {
			t.Fatal(err)
		}
		return cmd, g
	}
	dead, err := OpenLedger(home)
	if err != nil {
		t.Fatal(err)
	}
	deadCmd, deadGroup := start(dead)
	live, err := OpenLedger(home)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	_, liveGroup := start(live)
	// The owner dies: its lock goes, its directory stays.
	if err := dead.lock.Close(); err != nil {
		t.Fatal(err)
	}

	results, err := SweepLedgers(t.Context(), home, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].ID != deadGroup.ID || results[0].Status != Terminated {
		t.Fatalf("sweep results = %+v, want the dead owner's group terminated", results)
	}
	_ = deadCmd.Wait()
	if pids := markerCarriers(t, deadGroup.ID); len(pids) != 0 {
		t.Errorf("processes %v of the dead owner's group are alive after the sweep", pids)
	}
	if _, err := os.Stat(dead.reg.dir); !os.IsNotExist(err) {
		t.Errorf("the dead owner's ledger is still there: %v", err)
	}
	if status, _ := Inspect(liveGroup); status != Running {
		t.Errorf("the live owner's group is %s after the sweep, want running", status)
	}
	if _, err := os.Stat(filepath.Join(live.reg.dir, liveGroup.ID+recordExt)); err != nil {
		t.Errorf("the live owner's record: %v", err)
	}
}
