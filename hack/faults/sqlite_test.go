package faults

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver of the foreign connection
)

// TestSQLiteFullDisk runs a session whose home, and so its SQLite file,
// is on a small tmpfs that the test fills after the session's first model
// request: the run must fail with a clear message, leave the database
// intact, and resume to completion once space is freed.
func TestSQLiteFullDisk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	mountTmpfs(t, e.home, "4m")
	e.writeConfig(t)
	s := e.session(t, "full")
	// The disk fills up after the first tool call, as the session works.
	filler := filepath.Join(e.home, "filler")
	done := make(chan outcome, 1)
	go func() { done <- s.run(2 * time.Minute) }()
	asked := s.requests()
	for start := time.Now(); s.requests() < asked+2 && time.Since(start) < 30*time.Second; {
		time.Sleep(5 * time.Millisecond)
	}
	fill(t, filler)
	counts.faults.Add(1)
	out := <-done
	switch {
	case out.code == 0:
		violation(t, "a run on a disk that filled up exited 0; stderr:\n%s", tail(out.stderr))
	case !strings.Contains(out.stderr, "disk is full") && !strings.Contains(out.stderr, "no space left"):
		violation(t, "a run on a full disk exited %d without saying the disk is full; stderr:\n%s", out.code, tail(out.stderr))
	}
	t.Logf("full disk: exit %d: %s", out.code, lastLine(out.stderr))
	s.checkStored()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if out := s.run(2 * time.Minute); out.code != 0 {
		violation(t, "the resume after the disk was freed exited %d; stderr:\n%s", out.code, tail(out.stderr))
		return
	}
	s.checkEnd()
}

// TestSQLiteForeignLock runs sessions while another process's connection
// holds the database's write lock: a lock held for a moment is waited out
// and the session completes; a lock held past the journal's retry time
// fails the run with a clear message, and the session resumes to its end
// once the lock is gone.
func TestSQLiteForeignLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	path := filepath.Join(e.home, "sessions.db")

	brief := e.session(t, "brieflock")
	if out := brief.run(2 * time.Minute); out.code != 0 { // creates the database
		t.Fatalf("first run exited %d; stderr:\n%s", out.code, tail(out.stderr))
	}
	long := e.session(t, "longlock")
	release := lockWrites(t, path)
	counts.faults.Add(1)
	go func() { time.Sleep(3 * time.Second); release() }()
	if out := long.run(2 * time.Minute); out.code != 0 {
		violation(t, "a run under a 3 s foreign write lock exited %d; stderr:\n%s", out.code, tail(out.stderr))
	} else {
		long.checkEnd()
	}
	brief.checkEnd()

	stuck := e.session(t, "stucklock")
	release = lockWrites(t, path)
	counts.faults.Add(1)
	out := stuck.run(3 * time.Minute)
	release()
	if out.code == 0 {
		violation(t, "a run under a foreign write lock held throughout succeeded")
	} else if !strings.Contains(out.stderr, "locked") && !strings.Contains(out.stderr, "busy") {
		violation(t, "a run under a foreign write lock exited %d without saying the database is locked; stderr:\n%s", out.code, tail(out.stderr))
	}
	t.Logf("held lock: exit %d after %v: %s", out.code, out.took.Round(time.Second), lastLine(out.stderr))
	if stuck.stored() {
		stuck.checkStored()
	}
	if out := stuck.run(2 * time.Minute); out.code != 0 {
		violation(t, "the run after the lock was released exited %d; stderr:\n%s", out.code, tail(out.stderr))
		return
	}
	stuck.checkEnd()
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// lockWrites takes the write lock of the SQLite database at path from a
// connection of the test's own and returns the function that releases it.
func lockWrites(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		_ = conn.Close()
		_ = db.Close()
	}
	t.Cleanup(release)
	return release
}

// mountTmpfs mounts a tmpfs of size on dir, unmounted at cleanup. Without
// the privilege the test is skipped, or fails under CI=true.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := "mount a tmpfs for the full-disk test (needs root or CAP_SYS_ADMIN): " + strings.TrimSpace(string(out))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// fill writes path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// The last pages too, a few bytes at a time.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
}
