package process

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func testRecord(g Group, command string) Record {
	return Record{Group: g, Command: command, Dir: "/workspace", Owner: "session-1", StartedAt: time.Unix(1700000000, 0).UTC()}
}

// fakeGroup is a Group for records that are only read and written.
func fakeGroup() Group {
	return Group{ID: NewID(), PID: 4242, PGID: 4242, Birth: Fingerprint{StartTime: 99, BootID: "b"}}
}

func TestRegisterWritesPrivateRecord(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	reg := NewRegistry(home)
	rec := testRecord(fakeGroup(), "npm run dev")
	if err := reg.Register(rec); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "processes")
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("registry directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	if diff := cmp.Diff([]string{rec.ID + ".json"}, names); diff != "" {
		t.Errorf("registry holds (-want +got):\n%s", diff)
	}
	file := filepath.Join(dir, rec.ID+".json")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("record file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var got Record
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("record round trip (-want +got):\n%s", diff)
	}
	// The field names are a file format other versions read.
	for _, key := range []string{`"id"`, `"pid"`, `"pgid"`, `"birth"`, `"start_time"`, `"boot_id"`, `"command"`, `"dir"`, `"owner"`, `"started_at"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("record lacks %s:\n%s", key, data)
		}
	}
}

func TestRegisterRefusesIncompleteRecord(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(t.TempDir())
	for name, g := range map[string]Group{
		"bad id":         {ID: "../x", PID: 1, PGID: 1, Birth: Fingerprint{StartTime: 1}},
		"no pid":         {ID: NewID(), PGID: 1, Birth: Fingerprint{StartTime: 1}},
		"no fingerprint": {ID: NewID(), PID: 1, PGID: 1},
	} {
		if err := reg.Register(testRecord(g, "x")); err == nil {
			t.Errorf("%s: registered", name)
		}
	}
}

// TestRegisterIsAtomic rewrites one record over and over with contents of
// different lengths while readers parse it: a reader never sees a partial
// record, and no temporary file is left.
func TestRegisterIsAtomic(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	reg := NewRegistry(home)
	g := fakeGroup()
	if err := reg.Register(testRecord(g, "x")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, "processes", g.ID+".json")
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				data, err := os.ReadFile(file)
				if err != nil {
					t.Error(err)
					return
				}
				var rec Record
				if err := json.Unmarshal(data, &rec); err != nil {
					t.Errorf("partial record (%d bytes): %v", len(data), err)
					return
				}
			}
		})
	}
	for i := range 50 {
		if err := reg.Register(testRecord(g, strings.Repeat("y", (i*997)%5000))); err != nil {
			t.Error(err)
			break
		}
	}
	close(done)
	wg.Wait()
	des, _ := os.ReadDir(filepath.Join(home, "processes"))
	if len(des) != 1 {
		t.Errorf("registry holds %d files, want only the record", len(des))
	}
}

// liveGroup starts a group that ignores SIGTERM in one member and has an
// escapee, and registers it; it returns the record and its processes.
func liveGroup(t *testing.T, reg *Registry) (Record, map[string]proc) {
	t.Helper()
	s := startScript(t, stubbornScript)
	ps := s.expect(t, "member", "stubborn", "escaped")
	rec := testRecord(s.group, "sh -c ...")
	if err := reg.Register(rec); err != nil {
		t.Fatal(err)
	}
	// A preserved group outlives the runner that started it: reap the
	// leader's exit as the runner would when it ends, in the background.
	go func() { _ = s.wait() }() // nobody waits for the outcome
	return rec, ps
}

func TestTerminate(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(t.TempDir())
	rec, ps := liveGroup(t, reg)
	res := reg.Terminate(t.Context(), rec.ID, 50*time.Millisecond)
	if res.Status != Terminated || res.Report == nil || len(res.Report.Sent) == 0 {
		t.Fatalf("Terminate = %+v, want %s with signals sent", res, Terminated)
	}
	requireGone(t, ps)
	if left := markerCarriers(t, rec.ID); len(left) > 0 {
		t.Errorf("processes %v of the group are still alive", left)
	}
	if _, err := os.Stat(filepath.Join(reg.Dir(), rec.ID+".json")); !os.IsNotExist(err) {
		t.Errorf("record still there: %v", err)
	}
	// Again: the record is gone.
	if res := reg.Terminate(t.Context(), rec.ID, time.Second); res.Status != NotFound {
		t.Errorf("second Terminate = %+v, want %s", res, NotFound)
	}
}

// TestTerminateIdentityMismatch is PID-reuse safety: a record whose
// fingerprint does not match the live process with its PID is reported
// and kept, and the process is not signalled.
func TestTerminateIdentityMismatch(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(t.TempDir())
	cmd := exec.Command("sleep", "1000")
	g, err := Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	g.Birth.StartTime-- // the record's process started earlier: this one reused its PID
	if err := reg.Register(testRecord(g, "sleep 1000")); err != nil {
		t.Fatal(err)
	}
	res := reg.Terminate(t.Context(), g.ID, 10*time.Millisecond)
	if res.Status != IdentityMismatch || res.Reason == "" || len(res.Report.Sent) > 0 {
		t.Errorf("Terminate = %+v, want %s with a reason and nothing sent", res, IdentityMismatch)
	}
	if !alive(g.PID, g.Birth.StartTime+1) {
		t.Fatal("the unrelated process was signalled")
	}
	if _, err := os.Stat(filepath.Join(reg.Dir(), g.ID+".json")); err != nil {
		t.Errorf("record removed: %v", err)
	}
}

func TestTerminateAlreadyExited(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(t.TempDir())
	cmd := exec.Command("true")
	g, err := Start(cmd, NewID())
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(testRecord(g, "true")); err != nil {
		t.Fatal(err)
	}
	if res := reg.Terminate(t.Context(), g.ID, time.Second); res.Status != AlreadyExited {
		t.Errorf("Terminate = %+v, want %s", res, AlreadyExited)
	}
	if _, err := os.Stat(filepath.Join(reg.Dir(), g.ID+".json")); !os.IsNotExist(err) {
		t.Errorf("record still there: %v", err)
	}
}

func TestTerminateBadID(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(t.TempDir())
	for _, id := range []string{"", "../../etc/passwd", "a.json", NewID()} {
		if res := reg.Terminate(t.Context(), id, time.Second); res.Status != NotFound || res.Reason == "" {
			t.Errorf("Terminate(%q) = %+v, want %s", id, res, NotFound)
		}
	}
}

// registryFixture fills a registry with one record of each kind. The
// running group is the caller's to end.
type registryFixture struct {
	reg                             *Registry
	running, mismatch, exited, boot Record
	otherNS                         Record // a live process, seen from another PID namespace
	corrupt, misnamed, wrongID      string
	runningProcs                    map[string]proc
	sleeper                         proc // the process mismatch and otherNS point at
}

func newRegistryFixture(t *testing.T) registryFixture {
	t.Helper()
	f := registryFixture{reg: NewRegistry(t.TempDir())}
	f.running, f.runningProcs = liveGroup(t, f.reg)

	sleep := exec.Command("sleep", "1000")
	g, err := Start(sleep, NewID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	f.sleeper = proc{g.PID, g.Birth.StartTime}
	ns := g
	ns.ID = NewID()
	ns.Birth.PIDNamespace = "pid:[1]"
	f.otherNS = testRecord(ns, "sleep 1000")
	g.Birth.StartTime++
	f.mismatch = testRecord(g, "sleep 1000")

	done := exec.Command("true")
	if g, err = Start(done, NewID()); err != nil {
		t.Fatal(err)
	}
	if err := done.Wait(); err != nil {
		t.Fatal(err)
	}
	f.exited = testRecord(g, "true")

	// A record from before a reboot, pointing at this very process.
	self, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f.boot = testRecord(Group{ID: NewID(), PID: os.Getpid(), PGID: self.pgid,
		Birth: Fingerprint{StartTime: self.start, BootID: "another-boot"}}, "aerie")

	for _, rec := range []Record{f.mismatch, f.otherNS, f.exited, f.boot} {
		if err := f.reg.Register(rec); err != nil {
			t.Fatal(err)
		}
	}
	f.corrupt, f.wrongID, f.misnamed = NewID(), NewID(), "not valid"
	for name, content := range map[string]string{
		f.corrupt:                 `{"id": "` + f.corrupt + `", "pid": 12`,
		f.wrongID:                 mustJSON(t, testRecord(Group{ID: NewID(), PID: 1, PGID: 1, Birth: Fingerprint{StartTime: 1}}, "x")),
		f.misnamed:                `{}`,
		".tmp-ignored.json.tmp-1": `{`,
	} {
		if err := os.WriteFile(filepath.Join(f.reg.Dir(), name+".json"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (f registryFixture) files(t *testing.T) []string {
	t.Helper()
	ids, err := f.reg.ids()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestListRemovesExitedGroups(t *testing.T) {
	t.Parallel()
	f := newRegistryFixture(t)
	t.Cleanup(func() { f.reg.Terminate(t.Context(), f.running.ID, time.Millisecond) })
	entries, err := f.reg.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]Status)
	for _, e := range entries {
		got[e.ID] = e.Status
		if e.Status != Running && e.Reason == "" {
			t.Errorf("%s: %s without a reason", e.ID, e.Status)
		}
	}
	want := map[string]Status{
		f.running.ID:  Running,
		f.mismatch.ID: IdentityMismatch,
		f.otherNS.ID:  Unverifiable,
		f.corrupt:     Corrupt,
		f.wrongID:     Corrupt,
		f.misnamed:    Corrupt,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List statuses (-want +got):\n%s", diff)
	}
	wantFiles := []string{f.running.ID, f.mismatch.ID, f.otherNS.ID, f.corrupt, f.wrongID, f.misnamed}
	if diff := cmp.Diff(wantFiles, f.files(t), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("records kept (-want +got):\n%s", diff)
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	f := newRegistryFixture(t)
	results, err := f.reg.Clean(t.Context(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]Status)
	for _, r := range results {
		got[r.ID] = r.Status
	}
	want := map[string]Status{
		f.running.ID:  Terminated,
		f.mismatch.ID: IdentityMismatch,
		f.otherNS.ID:  Unverifiable,
		f.exited.ID:   AlreadyExited,
		f.boot.ID:     AlreadyExited,
		f.corrupt:     Corrupt,
		f.wrongID:     Corrupt,
		f.misnamed:    Corrupt,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Clean statuses (-want +got):\n%s", diff)
	}
	requireGone(t, f.runningProcs)
	if !alive(f.sleeper.pid, f.sleeper.start) {
		t.Error("the process behind the mismatched and unverifiable records was signalled")
	}
	// Unresolved records stay for a person to look at.
	var unresolved []string
	for _, r := range results {
		if !r.Status.Resolved() {
			unresolved = append(unresolved, r.ID)
		}
	}
	files := f.files(t)
	slices.Sort(unresolved)
	if diff := cmp.Diff(unresolved, files); diff != "" {
		t.Errorf("records kept (-want +got):\n%s", diff)
	}
}
