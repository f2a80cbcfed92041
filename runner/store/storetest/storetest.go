// Package storetest is the conformance suite every store backend must pass.
// The backends' tests run it against a real database:
//
//	storetest.Run(t, func(t *testing.T) string { return pg.NewDatabase(t) })
//	storetest.Run(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "sessions.db") })
//
// Each case opens the store through dburl.Open, so the URL dispatch is
// covered too, on a database of its own.
//
// Beside the suite, the package holds what the backends' own tests and
// benchmarks share: CorruptEntry, a scenario that needs a backend to write
// rows behind the store's back, and Transcript and Seed, a session shaped
// like a coding session.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/transcript"
)

// Run runs the conformance suite. newURL returns the URL of a fresh, empty
// database each time it is called; the suite calls it once per case and
// runs the cases in parallel.
func Run(t *testing.T, newURL func(t *testing.T) string) {
	cases := []struct {
		name string
		test func(t *testing.T, newURL func(t *testing.T) string)
	}{
		{"Migrations", testMigrations},
		{"CreateAndGet", testCreateAndGet},
		{"CreateWithEntries", testCreateWithEntries},
		{"CreateWithEntriesIsAtomic", testCreateWithEntriesIsAtomic},
		{"AppendAndRead", testAppendAndRead},
		{"AppendIsIdempotent", testAppendIsIdempotent},
		{"ConcurrentWritersKeepOrder", testConcurrentWriters},
		{"List", testList},
		{"Page", testPage},
		{"PageByOutcomeAndCost", testPageOutcomeCost},
		{"Resolve", testResolve},
		{"Tree", testTree},
		{"ForkCut", testForkCut},
		{"ForkCopiesPrefix", testForkCopiesPrefix},
		{"ResumeAfterCompaction", testResumeAfterCompaction},
		{"ResumeState", testResumeState},
		{"SoftDelete", testSoftDelete},
		{"TenantIsolation", testTenantIsolation},
		{"SetState", testSetState},
		{"Traces", testTraces},
		{"ToolOutputs", testToolOutputs},
		{"Memories", testMemories},
		{"MemoryCompareAndSwap", testMemoryCompareAndSwap},
		{"EmptyTenant", testEmptyTenant},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, newURL)
		})
	}
}

const tenant = "/home/dev/project"

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func open(t *testing.T, url string) store.Store {
	t.Helper()
	st, err := dburl.Open(ctx(t), url)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

func create(t *testing.T, st store.Store, tenant string, ns store.NewSession) store.Session {
	t.Helper()
	s, err := st.Create(ctx(t), tenant, ns)
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	return s
}

func appendEntries(t *testing.T, st store.Store, tenant string, id uuid.UUID, entries ...transcript.Entry) {
	t.Helper()
	if err := st.Append(ctx(t), tenant, id, entries); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func entries(t *testing.T, st store.Store, tenant string, id uuid.UUID) []transcript.Entry {
	t.Helper()
	es, err := st.Entries(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("read entries: %v", err)
	}
	return es
}

func session(t *testing.T, st store.Store, tenant string, id uuid.UUID) store.Session {
	t.Helper()
	s, err := st.Session(ctx(t), tenant, id)
	if err != nil {
		t.Fatalf("get session: %v", err)
	}
	return s
}

// clock hands out distinct, increasing entry times at the precision stores
// keep.
type clock struct{ t time.Time }

func newClock() *clock {
	return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) next() time.Time {
	c.t = c.t.Add(1500 * time.Microsecond)
	return c.t
}

// stream builds entries with consecutive sequence numbers.
type stream struct {
	seq   int64
	clock *clock
}

func newStream() *stream { return &stream{clock: newClock()} }

func (s *stream) add(p transcript.Payload) transcript.Entry {
	s.seq++
	return transcript.Entry{Seq: s.seq, Payload: p, CreatedAt: s.clock.next()}
}

func user(text string) transcript.UserMessage {
	return transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: text}}}
}

func assistant(text string) transcript.AssistantMessage {
	return transcript.AssistantMessage{Content: []transcript.Block{{Type: transcript.BlockText, Text: text}}, StopReason: "end_turn"}
}

func toolUse(id string) transcript.AssistantMessage {
	return transcript.AssistantMessage{
		Content:    []transcript.Block{{Type: transcript.BlockToolUse, ID: id, Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}},
		StopReason: "tool_use",
	}
}

// toolExchange is the entries of one complete tool call.
func toolExchange(s *stream, id string) []transcript.Entry {
	return []transcript.Entry{
		s.add(toolUse(id)),
		s.add(transcript.ToolCall{CallID: id, Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)}),
		s.add(transcript.ToolResult{CallID: id, Content: []transcript.Block{{Type: transcript.BlockText, Text: "go.mod\n"}}}),
		s.add(transcript.ToolCompletion{CallID: id, Status: transcript.ToolOK, Duration: 12 * time.Millisecond}),
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want %v", what, err, target)
	}
}

func testMigrations(t *testing.T, newURL func(t *testing.T) string) {
	url := newURL(t)
	first := open(t, url)
	s := create(t, first, tenant, store.NewSession{Dir: tenant, Label: "kept"})
	if err := first.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	// Opening again finds the schema current: migrations are not re-run
	// over existing data.
	again := open(t, url)
	if got := session(t, again, tenant, s.ID); got.Label != "kept" {
		t.Errorf("after reopening, session label = %q, want %q", got.Label, "kept")
	}

	// Several stores opening the same fresh database at once all succeed:
	// the migration is serialised, not raced.
	fresh := newURL(t)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			st, err := dburl.Open(ctx(t), fresh)
			if err == nil {
				_, err = st.Create(ctx(t), tenant, store.NewSession{Dir: tenant})
				err = errors.Join(err, st.Close())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent open %d: %v", i, err)
		}
	}
	st := open(t, fresh)
	list, err := st.List(ctx(t), tenant, store.ListOptions{})
	if err != nil || len(list) != n {
		t.Errorf("after concurrent opens: %d sessions, %v; want %d", len(list), err, n)
	}
}

func testCreateAndGet(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	ns := store.NewSession{
		ID:       uuid.New(),
		Dir:      "/work/repo",
		Settings: transcript.Settings{Provider: "anthropic", Model: "claude-x", Persona: "reviewer", Reasoning: "high"},
		Label:    "first",
	}
	before := time.Now().Add(-time.Second)
	got := create(t, st, tenant, ns)
	want := store.Session{
		ID:       ns.ID,
		Tenant:   tenant,
		Dir:      ns.Dir,
		Settings: ns.Settings,
		Kind:     store.SessionUser,
		Label:    "first",
		RootID:   ns.ID,
		State:    store.StateActive,
	}
	ignoreTimes := cmpopts.IgnoreFields(store.Session{}, "CreatedAt", "UpdatedAt")
	if diff := cmp.Diff(want, got, ignoreTimes); diff != "" {
		t.Errorf("Create returned (-want +got):\n%s", diff)
	}
	if got.CreatedAt.Before(before) || !got.UpdatedAt.Equal(got.CreatedAt) {
		t.Errorf("times: created %v, updated %v", got.CreatedAt, got.UpdatedAt)
	}
	if diff := cmp.Diff(got, session(t, st, tenant, ns.ID)); diff != "" {
		t.Errorf("Session differs from Create (-create +get):\n%s", diff)
	}

	generated := create(t, st, tenant, store.NewSession{Dir: tenant, Kind: store.SessionHeadless, State: store.StateIdle})
	if generated.ID == uuid.Nil || generated.RootID != generated.ID || generated.Kind != store.SessionHeadless {
		t.Errorf("defaults not applied: %+v", generated)
	}

	_, err := st.Create(ctx(t), tenant, ns)
	wantErr(t, "create with a taken id", err, store.ErrExists)
	_, err = st.Create(ctx(t), tenant, store.NewSession{Kind: store.SessionFork})
	wantErr(t, "create a fork", err, store.ErrInvalid)
	_, err = st.Create(ctx(t), tenant, store.NewSession{Kind: "robot"})
	wantErr(t, "create with unknown kind", err, store.ErrInvalid)
	_, err = st.Create(ctx(t), tenant, store.NewSession{State: "sleeping"})
	wantErr(t, "create with unknown state", err, store.ErrInvalid)
	_, err = st.Create(ctx(t), tenant, store.NewSession{Parent: uuid.New()})
	wantErr(t, "create with unknown parent", err, store.ErrNotFound)
	_, err = st.Session(ctx(t), tenant, uuid.New())
	wantErr(t, "get unknown session", err, store.ErrNotFound)
}

// firstEntries are what a run stores with a new session: the layers it
// uses and the user's prompt.
func firstEntries(s *stream, prompt string) []transcript.Entry {
	return []transcript.Entry{
		s.add(transcript.Layers{Layers: []transcript.Layer{{Name: "bundled", Kind: "bundled"}}}),
		s.add(user(prompt)),
	}
}

func testCreateWithEntries(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	str := newStream()
	first := firstEntries(str, "fix the build")
	ns := store.NewSession{ID: uuid.New(), Dir: tenant, Kind: store.SessionHeadless, Entries: first}
	got := create(t, st, tenant, ns)
	if got.EntryCount != 2 || got.LastSeq != 2 {
		t.Errorf("Create counts %d entries, last %d; want 2, 2", got.EntryCount, got.LastSeq)
	}
	if diff := cmp.Diff(got, session(t, st, tenant, ns.ID)); diff != "" {
		t.Errorf("Session differs from Create (-create +get):\n%s", diff)
	}
	if diff := cmp.Diff(first, entries(t, st, tenant, ns.ID), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Entries after Create (-created +read):\n%s", diff)
	}
	_, snap, err := st.Load(ctx(t), tenant, ns.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, snap.Entries, cmpopts.EquateEmpty()); diff != "" || snap.LastSeq != 2 {
		t.Errorf("Load after Create: last %d, entries (-created +loaded):\n%s", snap.LastSeq, diff)
	}

	// The stream goes on after them; a retry of the first entries, or of
	// a batch that repeats them, writes nothing twice.
	more := []transcript.Entry{str.add(assistant("done")), str.add(transcript.Checkpoint{Turn: 1, Outcome: "completed"})}
	appendEntries(t, st, tenant, ns.ID, more...)
	appendEntries(t, st, tenant, ns.ID, first...)
	appendEntries(t, st, tenant, ns.ID, append(first[1:], more...)...)
	all := append(slices.Clone(first), more...)
	if diff := cmp.Diff(all, entries(t, st, tenant, ns.ID), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Entries after appends (-want +got):\n%s", diff)
	}
	if s := session(t, st, tenant, ns.ID); s.EntryCount != 4 || s.LastSeq != 4 {
		t.Errorf("after appends: %d entries, last %d; want 4, 4", s.EntryCount, s.LastSeq)
	}

	// A fork of it copies them like any other entries.
	child, err := st.Fork(ctx(t), tenant, ns.ID, store.ForkOptions{At: 2})
	if err != nil {
		t.Fatal(err)
	}
	if es := entries(t, st, tenant, child.ID); len(es) != 3 || es[1].Kind() != transcript.KindUserMessage || es[2].Kind() != transcript.KindFork {
		t.Errorf("fork at the prompt: %v", kindsOf(es))
	}

	// A batch Append would refuse refuses the whole creation: neither the
	// session nor any of its entries is stored, and the id stays free.
	valid := user("valid")
	refused := map[string][]transcript.Entry{
		"an invalid payload":                {{Seq: 1, Payload: valid}, {Seq: 2, Payload: transcript.ToolCall{CallID: "x"}}},
		"sequence numbers that do not rise": {{Seq: 2, Payload: valid}, {Seq: 2, Payload: valid}},
		"sequence number 0":                 {{Seq: 0, Payload: valid}},
		"a compaction":                      {{Seq: 1, Payload: valid}, {Seq: 2, Payload: transcript.Compaction{FirstKept: 2}}},
	}
	id := uuid.New()
	for what, es := range refused {
		_, err := st.Create(ctx(t), tenant, store.NewSession{ID: id, Dir: tenant, Entries: es})
		wantErr(t, "create with "+what, err, store.ErrInvalid)
		_, err = st.Session(ctx(t), tenant, id)
		wantErr(t, "the session after a create with "+what, err, store.ErrNotFound)
	}
	// An id already taken stores none of the entries either.
	_, err = st.Create(ctx(t), tenant, store.NewSession{ID: ns.ID, Dir: tenant, Entries: firstEntries(newStream(), "again")})
	wantErr(t, "create with a taken id and entries", err, store.ErrExists)
	if diff := cmp.Diff(all, entries(t, st, tenant, ns.ID), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Entries after a refused create with the same id (-want +got):\n%s", diff)
	}
	create(t, st, tenant, store.NewSession{ID: id, Dir: tenant, Entries: firstEntries(newStream(), "now")})
	if es := entries(t, st, tenant, id); len(es) != 2 {
		t.Errorf("the id refused before: %d entries, want 2", len(es))
	}
}

// testCreateWithEntriesIsAtomic reads sessions while others are created
// with their first entries: a session that can be found has them all.
func testCreateWithEntriesIsAtomic(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	done := make(chan struct{})
	var checked atomic.Int64
	var readErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			ss, err := st.List(ctx(t), tenant, store.ListOptions{})
			if err != nil {
				readErr = err
				return
			}
			for _, s := range ss {
				_, snap, err := st.Load(ctx(t), tenant, s.ID)
				if err != nil {
					readErr = err
					return
				}
				checked.Add(1)
				if s.EntryCount != 2 || len(snap.Entries) != 2 || snap.LastSeq != 2 {
					readErr = fmt.Errorf("session %s found with %d entries counted, %d loaded, last %d; want 2", s.ID, s.EntryCount, len(snap.Entries), snap.LastSeq)
					return
				}
			}
		}
	})
	// At least 40 sessions, and more until the reader has checked some.
	n := 0
	for ; n < 40 || (checked.Load() < 10 && n < 10000); n++ {
		create(t, st, tenant, store.NewSession{Dir: tenant, Entries: firstEntries(newStream(), fmt.Sprintf("task %d", n))})
	}
	close(done)
	wg.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
	if checked.Load() == 0 {
		t.Fatalf("the reader checked no session while %d were created", n)
	}
	if got := len(list(t, st)); got != n {
		t.Errorf("%d sessions stored, want %d", got, n)
	}
}

func list(t *testing.T, st store.Store) []store.Session {
	t.Helper()
	ss, err := st.List(ctx(t), tenant, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func kindsOf(es []transcript.Entry) []transcript.EntryKind {
	ks := make([]transcript.EntryKind, len(es))
	for i, e := range es {
		ks[i] = e.Kind()
	}
	return ks
}

// everyKind is one entry of every kind, so that each payload type makes the
// round trip through the database.
func everyKind(s *stream, child uuid.UUID) []transcript.Entry {
	es := []transcript.Entry{
		s.add(user("hello")),
		s.add(transcript.AssistantMessage{Content: []transcript.Block{
			{Type: transcript.BlockThinking, Text: "let me look", Signature: "sig=="},
			{Type: transcript.BlockText, Text: "looking \u0000 now"}, // NUL survives the round trip
		}}),
	}
	es = append(es, toolExchange(s, "call-1")...)
	return append(es,
		s.add(transcript.ProviderChange{Provider: "openai"}),
		s.add(transcript.ModelChange{Model: "gpt-x"}),
		s.add(transcript.PersonaChange{Persona: "terse"}),
		s.add(transcript.ReasoningChange{Effort: "low"}),
		s.add(transcript.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 800, Requests: 2, CostUSD: 0.0125}),
		s.add(transcript.Checkpoint{Turn: 1, Outcome: "end_turn"}),
		s.add(transcript.UserMessage{Content: []transcript.Block{{Type: transcript.BlockImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}}}),
		s.add(transcript.SubagentOutcome{Session: child, Outcome: "completed", Summary: "found it", Usage: &transcript.Usage{InputTokens: 10}}),
		s.add(transcript.HookVerdict{Event: "PreToolUse", CallID: "call-1", Tool: "bash", Decision: "block", Reason: "denied",
			Runs: []transcript.HookRun{{Hook: "/ws/.aerie/hooks/guard.yaml#PreToolUse[0].hooks[0]", Exit: 0, Duration: 3 * time.Millisecond, Decision: "block", Reason: "denied"}}}),
		s.add(transcript.Fork{Source: child, SourceSeq: 3}),
		s.add(transcript.Layers{Layers: []transcript.Layer{{Name: "go", Kind: "spec", Source: "configmap/go-tools", Digest: "sha256:00ff"}, {Name: "bundled", Kind: "bundled"}}}),
		s.add(transcript.Compaction{
			Replacement: []transcript.Block{{Type: transcript.BlockText, Text: "summary"}},
			FirstKept:   1,
			Provenance:  transcript.Provenance{Trigger: "manual", Model: "claude-x", Messages: 4, PendingChildren: []uuid.UUID{child}},
		}),
	)
}

func testAppendAndRead(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{Dir: tenant})
	str := newStream()
	es := everyKind(str, uuid.New())
	appendEntries(t, st, tenant, s.ID, es[:3]...)
	appendEntries(t, st, tenant, s.ID, es[3:]...)

	got := entries(t, st, tenant, s.ID)
	// The final compaction (FirstKept 1) compacts nothing: there is nothing
	// before entry 1.
	if diff := cmp.Diff(es, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Entries (-appended +read):\n%s", diff)
	}
	after := session(t, st, tenant, s.ID)
	if after.EntryCount != int64(len(es)) || after.LastSeq != str.seq {
		t.Errorf("session counts: %d entries, last %d; want %d, %d", after.EntryCount, after.LastSeq, len(es), str.seq)
	}
	if after.UpdatedAt.Before(s.UpdatedAt) {
		t.Errorf("UpdatedAt %v did not move on from %v", after.UpdatedAt, s.UpdatedAt)
	}

	// Gaps are allowed (a failed writer skips entries), order is not.
	gap := str.add(user("after a gap"))
	gap.Seq += 5
	appendEntries(t, st, tenant, s.ID, gap)
	err := st.Append(ctx(t), tenant, s.ID, []transcript.Entry{str.add(user("a")), {Seq: 1, Payload: user("b")}})
	wantErr(t, "append decreasing sequence numbers", err, store.ErrInvalid)
	err = st.Append(ctx(t), tenant, s.ID, []transcript.Entry{{Seq: 100, Payload: transcript.ToolCall{CallID: "x"}}})
	wantErr(t, "append an invalid payload", err, store.ErrInvalid)
	err = st.Append(ctx(t), tenant, s.ID, []transcript.Entry{{Seq: 0, Payload: user("zero")}})
	wantErr(t, "append sequence number 0", err, store.ErrInvalid)
	err = st.Append(ctx(t), tenant, s.ID, []transcript.Entry{{Seq: 101, Payload: transcript.Compaction{FirstKept: 200}}})
	wantErr(t, "append a compaction keeping from after itself", err, store.ErrInvalid)
	err = st.Append(ctx(t), tenant, uuid.New(), []transcript.Entry{{Seq: 1, Payload: user("lost")}})
	wantErr(t, "append to unknown session", err, store.ErrNotFound)
	if got := entries(t, st, tenant, s.ID); len(got) != len(es)+1 {
		t.Errorf("after rejected appends: %d entries, want %d", len(got), len(es)+1)
	}
}

func testAppendIsIdempotent(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{Dir: tenant})
	str := newStream()
	var es []transcript.Entry
	for i := range 200 { // beyond any threshold at which a backend changes strategy
		es = append(es, str.add(user(fmt.Sprintf("m%d", i))))
	}
	for _, batch := range [][]transcript.Entry{es[:5], es[:5], es[3:8], es[:150], es, es} {
		appendEntries(t, st, tenant, s.ID, batch...)
	}
	if diff := cmp.Diff(es, entries(t, st, tenant, s.ID), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("after repeated batches (-want +got):\n%s", diff)
	}
	if got := session(t, st, tenant, s.ID); got.EntryCount != int64(len(es)) || got.LastSeq != 200 {
		t.Errorf("counts after repeated batches: %d entries, last %d; want 200, 200", got.EntryCount, got.LastSeq)
	}
}

func testConcurrentWriters(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	const sessions, batches = 6, 30
	ids := make([]uuid.UUID, sessions)
	want := make([][]transcript.Entry, sessions)
	for i := range ids {
		ids[i] = create(t, st, tenant, store.NewSession{Dir: tenant}).ID
	}
	var wg sync.WaitGroup
	errs := make([]error, sessions)
	for i, id := range ids {
		str := newStream()
		wg.Go(func() {
			for b := range batches {
				var batch []transcript.Entry
				for k := range 1 + (b+i)%5 {
					batch = append(batch, str.add(user(fmt.Sprintf("s%d b%d e%d", i, b, k))))
				}
				want[i] = append(want[i], batch...)
				if err := st.Append(ctx(t), tenant, id, batch); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if diff := cmp.Diff(want[i], entries(t, st, tenant, id), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("session %d (-want +got):\n%s", i, diff)
		}
	}
}

func testList(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	a := create(t, st, tenant, store.NewSession{Dir: tenant, Label: "a"})
	b := create(t, st, tenant, store.NewSession{Dir: tenant, Label: "b"})
	create(t, st, tenant, store.NewSession{Dir: tenant, Label: "c"})
	// a gets entries last, so it is the most recently updated.
	str := newStream()
	appendEntries(t, st, tenant, a.ID, str.add(user("1")), str.add(assistant("2")))
	if err := st.Delete(ctx(t), tenant, b.ID); err != nil {
		t.Fatal(err)
	}

	list, err := st.List(ctx(t), tenant, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Label   string
		Entries int64
	}
	rows := func(ss []store.Session) []row {
		var rs []row
		for _, s := range ss {
			rs = append(rs, row{s.Label, s.EntryCount})
		}
		return rs
	}
	if diff := cmp.Diff([]row{{"a", 2}, {"c", 0}}, rows(list)); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	all, err := st.List(ctx(t), tenant, store.ListOptions{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Errorf("List with deleted: %d sessions, want 3", len(all))
	}
}

func testPage(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	mk := func(label, model string, state store.State) store.Session {
		return create(t, st, tenant, store.NewSession{Dir: tenant, Label: label, State: state,
			Settings: transcript.Settings{Model: model}})
	}
	a := mk("alpha", "claude-x", store.StateCompleted)
	mk("beta_1", "gpt-y", store.StateIdle)
	mk("Gamma%", "claude-z", store.StateIdle)
	mk("delta", "", store.StateFailed)
	create(t, st, tenant, store.NewSession{Dir: tenant, Label: "sub", Parent: a.ID, Kind: store.SessionSubagent})
	gone := mk("gone", "claude-x", store.StateIdle)
	if err := st.Delete(ctx(t), tenant, gone.ID); err != nil {
		t.Fatal(err)
	}
	create(t, st, "another tenant", store.NewSession{Dir: tenant, Label: "alpha2"})
	labels := func(ss []store.Session) []string {
		out := []string{}
		for _, s := range ss {
			out = append(out, s.Label)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		opts  store.PageOptions
		want  []string
		total int
	}{
		{"all, most recently updated first", store.PageOptions{Desc: true},
			[]string{"delta", "Gamma%", "beta_1", "alpha"}, 4},
		{"with subagents, by label", store.PageOptions{Subagents: true, Order: store.OrderLabel},
			[]string{"Gamma%", "alpha", "beta_1", "delta", "sub"}, 5},
		{"a state", store.PageOptions{State: store.StateIdle, Order: store.OrderLabel},
			[]string{"Gamma%", "beta_1"}, 2},
		{"a label, ignoring case", store.PageOptions{Label: "GAMMA"}, []string{"Gamma%"}, 1},
		{"a label's wildcards are letters", store.PageOptions{Label: "a%"}, []string{"Gamma%"}, 1},
		{"a label's underscore too", store.PageOptions{Label: "a_1"}, []string{"beta_1"}, 1},
		{"a model", store.PageOptions{Model: "claude", Order: store.OrderLabel}, []string{"Gamma%", "alpha"}, 2},
		{"updated since", store.PageOptions{UpdatedSince: time.Now().Add(time.Hour)}, []string{}, 0},
		{"a page", store.PageOptions{Order: store.OrderLabel, Offset: 1, Limit: 2}, []string{"alpha", "beta_1"}, 4},
		{"past the end", store.PageOptions{Offset: 10, Limit: 2}, []string{}, 4},
	} {
		got, total, err := st.Page(ctx(t), tenant, tc.opts)
		if err != nil {
			t.Fatalf("%s: Page: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, labels(got)); diff != "" || total != tc.total {
			t.Errorf("%s: Page: total %d, want %d; labels (-want +got):\n%s", tc.name, total, tc.total, diff)
		}
	}
	for _, bad := range []store.PageOptions{{Order: "tokens"}, {State: "asleep"}, {Limit: -1}} {
		_, _, err := st.Page(ctx(t), tenant, bad)
		wantErr(t, fmt.Sprintf("Page(%+v)", bad), err, store.ErrInvalid)
	}
}

// testPageOutcomeCost: Page sorts by the outcome of a session's latest
// checkpoint and the cost of its latest usage entry, whether stored with
// the session, appended later, or copied by a fork.
func testPageOutcomeCost(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	now := time.Now()
	usage := func(seq int64, cost float64) transcript.Entry {
		return transcript.Entry{Seq: seq, Payload: transcript.Usage{InputTokens: 1, CostUSD: cost}, CreatedAt: now}
	}
	checkpoint := func(seq int64, o transcript.Outcome) transcript.Entry {
		return transcript.Entry{Seq: seq, Payload: transcript.Checkpoint{Turn: 1, Outcome: o}, CreatedAt: now}
	}
	user := transcript.Entry{Seq: 1, Payload: transcript.UserMessage{
		Content: []transcript.Block{{Type: transcript.BlockText, Text: "go"}}}, CreatedAt: now}
	cheap := create(t, st, tenant, store.NewSession{Dir: tenant, Label: "cheap", State: store.StateIdle,
		Entries: []transcript.Entry{user, usage(2, 0.5), checkpoint(3, transcript.OutcomeFailed)}})
	// Its latest usage is cheaper than its first.
	if err := st.Append(ctx(t), tenant, cheap.ID, []transcript.Entry{usage(4, 0.1)}); err != nil {
		t.Fatal(err)
	}
	create(t, st, tenant, store.NewSession{Dir: tenant, Label: "pricey", State: store.StateIdle,
		Entries: []transcript.Entry{user, usage(2, 3), checkpoint(3, transcript.OutcomeCompleted)}})
	create(t, st, tenant, store.NewSession{Dir: tenant, Label: "none", State: store.StateIdle, Entries: []transcript.Entry{user}})
	// A fork before cheap's second usage costs what its first did.
	if _, err := st.Fork(ctx(t), tenant, cheap.ID, store.ForkOptions{At: 3, Label: "fork"}); err != nil {
		t.Fatal(err)
	}
	labels := func(ss []store.Session) []string {
		out := []string{}
		for _, s := range ss {
			out = append(out, s.Label)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		opts store.PageOptions
		want []string
	}{
		{"by cost", store.PageOptions{Order: store.OrderCost}, []string{"none", "cheap", "fork", "pricey"}},
		{"by cost, descending", store.PageOptions{Order: store.OrderCost, Desc: true}, []string{"pricey", "fork", "cheap", "none"}},
		{"by outcome, a page", store.PageOptions{Order: store.OrderOutcome, Offset: 1, Limit: 1}, []string{"pricey"}},
	} {
		got, _, err := st.Page(ctx(t), tenant, tc.opts)
		if err != nil {
			t.Fatalf("%s: Page: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, labels(got)); diff != "" {
			t.Errorf("%s: Page: labels (-want +got):\n%s", tc.name, diff)
		}
	}
	got, _, err := st.Page(ctx(t), tenant, store.PageOptions{Order: store.OrderOutcome})
	if err != nil {
		t.Fatal(err)
	}
	// "" < "completed" < "failed"; the two failed ones by id.
	if l := labels(got); len(l) != 4 || l[0] != "none" || l[1] != "pricey" {
		t.Errorf("by outcome: %q, want none, pricey, then the failed two", l)
	}
}

// idWithPrefix returns a random id whose canonical form starts with prefix.
func idWithPrefix(prefix string) uuid.UUID {
	s := uuid.New().String()
	return uuid.MustParse(prefix + s[len(prefix):])
}

func testResolve(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	a := create(t, st, tenant, store.NewSession{ID: idWithPrefix("aaaa1111"), Dir: tenant, Label: "main"})
	b := create(t, st, tenant, store.NewSession{ID: idWithPrefix("aaaa2222"), Dir: tenant, Label: "twin"})
	c := create(t, st, tenant, store.NewSession{ID: idWithPrefix("bbbb0000"), Dir: tenant, Label: "twin"})
	d := create(t, st, tenant, store.NewSession{ID: idWithPrefix("cccc0000"), Dir: tenant, Label: "aaaa1"})

	tests := []struct {
		ref        string
		want       uuid.UUID
		err        error
		candidates []uuid.UUID
	}{
		{ref: a.ID.String(), want: a.ID},
		{ref: "AAAA1111", want: a.ID}, // prefixes ignore case
		{ref: "aaaa2", want: b.ID},    // unique prefix
		{ref: "main", want: a.ID},     // label
		{ref: "cccc", want: d.ID},     // prefix of d
		{ref: "aaaa1", err: store.ErrAmbiguous, candidates: []uuid.UUID{a.ID, d.ID}}, // a's prefix, d's label
		{ref: "aaaa", err: store.ErrAmbiguous, candidates: []uuid.UUID{a.ID, b.ID}},
		{ref: "twin", err: store.ErrAmbiguous, candidates: []uuid.UUID{b.ID, c.ID}},
		{ref: "dddd", err: store.ErrNotFound},
		{ref: "no-such-label", err: store.ErrNotFound},
		{ref: "a%", err: store.ErrNotFound}, // no LIKE wildcards
		{ref: "", err: store.ErrInvalid},
	}
	for _, tt := range tests {
		got, err := st.Resolve(ctx(t), tenant, tt.ref)
		if tt.err != nil {
			wantErr(t, fmt.Sprintf("Resolve(%q)", tt.ref), err, tt.err)
			var amb *store.AmbiguousError
			if errors.As(err, &amb) {
				var ids []uuid.UUID
				for _, s := range amb.Candidates {
					ids = append(ids, s.ID)
				}
				slices.SortFunc(ids, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
				if diff := cmp.Diff(tt.candidates, ids); diff != "" {
					t.Errorf("Resolve(%q) candidates (-want +got):\n%s", tt.ref, diff)
				}
			}
			continue
		}
		if err != nil || got.ID != tt.want {
			t.Errorf("Resolve(%q) = %s, %v; want %s", tt.ref, got.ID, err, tt.want)
		}
	}
}

func testTree(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	root := create(t, st, tenant, store.NewSession{Dir: tenant, Label: "root"})
	str := newStream()
	appendEntries(t, st, tenant, root.ID, str.add(user("hi")), str.add(assistant("hello")))
	fork, err := st.Fork(ctx(t), tenant, root.ID, store.ForkOptions{Label: "branch"})
	if err != nil {
		t.Fatal(err)
	}
	sub := create(t, st, tenant, store.NewSession{Dir: tenant, Kind: store.SessionSubagent, Parent: fork.ID, Label: "helper"})
	forkOfFork, err := st.Fork(ctx(t), tenant, fork.ID, store.ForkOptions{Label: "twig"})
	if err != nil {
		t.Fatal(err)
	}
	create(t, st, tenant, store.NewSession{Dir: tenant, Label: "other"})

	for _, s := range []store.Session{fork, sub, forkOfFork} {
		if s.RootID != root.ID {
			t.Errorf("%s: root %s, want %s", s.Label, s.RootID, root.ID)
		}
	}
	if sub.ParentID != fork.ID || forkOfFork.ParentID != fork.ID || fork.ParentID != root.ID {
		t.Errorf("parents: sub %s, twig %s, branch %s", sub.ParentID, forkOfFork.ParentID, fork.ParentID)
	}

	list, err := st.List(ctx(t), tenant, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Label    string
		Children []node
	}
	var shape func(ns []*store.Node) []node
	shape = func(ns []*store.Node) []node {
		var out []node
		for _, n := range ns {
			out = append(out, node{n.Session.Label, shape(n.Children)})
		}
		return out
	}
	want := []node{
		{"root", []node{{"branch", []node{{"helper", nil}, {"twig", nil}}}}},
		{"other", nil},
	}
	if diff := cmp.Diff(want, shape(store.BuildTree(list))); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
}

func testForkCut(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	src := create(t, st, tenant, store.NewSession{Dir: tenant, Label: "src"})
	str := newStream()
	es := []transcript.Entry{str.add(user("list files"))} // 1
	es = append(es, toolExchange(str, "c1")...)           // 2..5: use, call 3, result 4, completion 5
	es = append(es,
		str.add(assistant("done")),                                        // 6
		str.add(toolUse("c2")),                                            // 7
		str.add(transcript.ToolCall{CallID: "c2", Name: "bash"}),          // 8
		str.add(transcript.ToolCall{CallID: "c3", Name: "read"}),          // 9, two calls in flight
		str.add(transcript.ToolCompletion{CallID: "c3", Status: "error"}), // 10, c3 closed, c2 still open
	)
	appendEntries(t, st, tenant, src.ID, es...)
	srcBefore := session(t, st, tenant, src.ID)

	tests := []struct {
		at  int64
		err error
	}{
		{at: 1}, {at: 2}, {at: 5}, {at: 6}, {at: 7},
		{at: 3, err: store.ErrInvalidCut},  // c1 called, not completed
		{at: 4, err: store.ErrInvalidCut},  // result stored, completion not yet
		{at: 8, err: store.ErrInvalidCut},  // c2 open
		{at: 9, err: store.ErrInvalidCut},  // c2 and c3 open
		{at: 10, err: store.ErrInvalidCut}, // c2 still open
		{at: 0, err: store.ErrInvalidCut},  // the default, latest, is inside c2
		{at: 11, err: store.ErrInvalidCut}, // past the end
		{at: -1, err: store.ErrInvalidCut},
	}
	for _, tt := range tests {
		child, err := st.Fork(ctx(t), tenant, src.ID, store.ForkOptions{At: tt.at})
		if tt.err != nil {
			wantErr(t, fmt.Sprintf("fork at %d", tt.at), err, tt.err)
			continue
		}
		if err != nil {
			t.Errorf("fork at %d: %v", tt.at, err)
			continue
		}
		if child.LastSeq != tt.at+1 {
			t.Errorf("fork at %d: child last seq %d, want %d", tt.at, child.LastSeq, tt.at+1)
		}
	}

	// The source is unchanged by all of it.
	if diff := cmp.Diff(es, entries(t, st, tenant, src.ID), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("source entries changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(srcBefore, session(t, st, tenant, src.ID)); diff != "" {
		t.Errorf("source session changed (-before +after):\n%s", diff)
	}

	// Completing c2 makes the latest sequence a valid default cut.
	appendEntries(t, st, tenant, src.ID,
		str.add(transcript.ToolResult{CallID: "c2", Content: []transcript.Block{{Type: transcript.BlockText, Text: "ok"}}}),
		str.add(transcript.ToolCompletion{CallID: "c2", Status: transcript.ToolOK}))
	child, err := st.Fork(ctx(t), tenant, src.ID, store.ForkOptions{})
	if err != nil {
		t.Fatalf("fork at latest: %v", err)
	}
	if child.LastSeq != str.seq+1 {
		t.Errorf("default fork: child last seq %d, want %d", child.LastSeq, str.seq+1)
	}

	// An empty session forks at 0.
	empty := create(t, st, tenant, store.NewSession{Dir: tenant})
	if child, err := st.Fork(ctx(t), tenant, empty.ID, store.ForkOptions{}); err != nil || child.LastSeq != 1 {
		t.Errorf("fork of an empty session: last seq %d, %v; want 1, nil", child.LastSeq, err)
	}
	_, err = st.Fork(ctx(t), tenant, uuid.New(), store.ForkOptions{})
	wantErr(t, "fork of unknown session", err, store.ErrNotFound)
}

func testForkCopiesPrefix(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	src := create(t, st, tenant, store.NewSession{
		Dir: "/repo", Settings: transcript.Settings{Provider: "anthropic", Model: "m1", Persona: "p1"}, Label: "src",
	})
	str := newStream()
	es := []transcript.Entry{
		str.add(user("one")),                           // 1
		str.add(assistant("two")),                      // 2
		str.add(transcript.ModelChange{Model: "m2"}),   // 3
		str.add(user("three")),                         // 4
		str.add(transcript.ModelChange{Model: "m3"}),   // 5
		str.add(transcript.PersonaChange{Persona: ""}), // 6
		str.add(assistant("four")),                     // 7
	}
	appendEntries(t, st, tenant, src.ID, es...)

	childID := uuid.New()
	child, err := st.Fork(ctx(t), tenant, src.ID, store.ForkOptions{At: 4, ID: childID, Label: "branch"})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Session{
		ID:         childID,
		Tenant:     tenant,
		Dir:        "/repo",
		Settings:   transcript.Settings{Provider: "anthropic", Model: "m2", Persona: "p1"}, // in force at 4
		Kind:       store.SessionFork,
		Label:      "branch",
		ParentID:   src.ID,
		RootID:     src.ID,
		State:      store.StateIdle,
		EntryCount: 5,
		LastSeq:    5,
	}
	ignoreTimes := cmpopts.IgnoreFields(store.Session{}, "CreatedAt", "UpdatedAt")
	if diff := cmp.Diff(want, child, ignoreTimes); diff != "" {
		t.Errorf("forked session (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(child, session(t, st, tenant, childID)); diff != "" {
		t.Errorf("stored child differs from returned (-returned +stored):\n%s", diff)
	}

	got := entries(t, st, tenant, childID)
	if len(got) != 5 {
		t.Fatalf("child has %d entries, want 5", len(got))
	}
	if diff := cmp.Diff(es[:4], got[:4], cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("copied prefix (-source +child):\n%s", diff)
	}
	if diff := cmp.Diff(transcript.Fork{Source: src.ID, SourceSeq: 4}, got[4].Payload); diff != "" || got[4].Seq != 5 {
		t.Errorf("fork entry %d (-want +got):\n%s", got[4].Seq, diff)
	}

	// The child continues on its own; the source does not see it.
	str2 := &stream{seq: 5, clock: newClock()}
	appendEntries(t, st, tenant, childID, str2.add(user("child only")))
	if n := len(entries(t, st, tenant, src.ID)); n != len(es) {
		t.Errorf("source has %d entries after child append, want %d", n, len(es))
	}
	_, snap, err := st.Load(ctx(t), tenant, childID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Settings.Model != "m2" || snap.LastSeq != 6 {
		t.Errorf("child snapshot: model %q, last seq %d; want m2, 6", snap.Settings.Model, snap.LastSeq)
	}
}

func testResumeAfterCompaction(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{Dir: tenant, Settings: transcript.Settings{Model: "m1"}})
	str := newStream()
	var es []transcript.Entry
	for i := range 10 { // 1..10
		if i%2 == 0 {
			es = append(es, str.add(user(fmt.Sprintf("q%d", i))))
		} else {
			es = append(es, str.add(assistant(fmt.Sprintf("a%d", i))))
		}
	}
	first := transcript.Compaction{
		Replacement: []transcript.Block{{Type: transcript.BlockText, Text: "summary of 1-6"}},
		FirstKept:   7,
		Provenance:  transcript.Provenance{Trigger: "auto", Model: "m1", Messages: 6, TokensBefore: 9000, TokensAfter: 1200},
	}
	es = append(es, str.add(first))                                  // 11
	es = append(es, str.add(user("q11")), str.add(assistant("a12"))) // 12, 13
	appendEntries(t, st, tenant, s.ID, es...)

	_, snap, err := st.Load(ctx(t), tenant, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&first, snap.Compaction, cmpopts.EquateEmpty()); diff != "" || snap.CompactionSeq != 11 {
		t.Errorf("compaction at %d (-want +got):\n%s", snap.CompactionSeq, diff)
	}
	tail := slices.Concat(es[6:10], es[11:13]) // 7..10 and 12..13
	if diff := cmp.Diff(tail, snap.Entries, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("active tail (-want +got):\n%s", diff)
	}
	if snap.LastSeq != 13 {
		t.Errorf("last seq %d, want 13", snap.LastSeq)
	}

	// Nothing was deleted: the compacted entries are marked.
	compactedBy := func(id uuid.UUID) []int64 {
		var marks []int64
		for _, e := range entries(t, st, tenant, id) {
			marks = append(marks, e.CompactedBy)
		}
		return marks
	}
	want := []int64{11, 11, 11, 11, 11, 11, 0, 0, 0, 0, 0, 0, 0}
	if diff := cmp.Diff(want, compactedBy(s.ID)); diff != "" {
		t.Errorf("compaction marks (-want +got):\n%s", diff)
	}

	// A second compaction replaces the first (and the tail up to its cut).
	second := transcript.Compaction{Replacement: []transcript.Block{{Type: transcript.BlockText, Text: "summary of 1-11"}}, FirstKept: 12,
		Provenance: transcript.Provenance{Trigger: "manual"}}
	appendEntries(t, st, tenant, s.ID, str.add(second), str.add(user("q15"))) // 14, 15
	_, snap, err = st.Load(ctx(t), tenant, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.CompactionSeq != 14 || snap.Compaction.Replacement[0].Text != "summary of 1-11" {
		t.Errorf("latest compaction at %d: %+v", snap.CompactionSeq, snap.Compaction)
	}
	var seqs []int64
	for _, e := range snap.Entries {
		seqs = append(seqs, e.Seq)
	}
	if diff := cmp.Diff([]int64{12, 13, 15}, seqs); diff != "" {
		t.Errorf("tail after second compaction (-want +got):\n%s", diff)
	}
	want = []int64{11, 11, 11, 11, 11, 11, 14, 14, 14, 14, 14, 0, 0, 0, 0}
	if diff := cmp.Diff(want, compactedBy(s.ID)); diff != "" {
		t.Errorf("compaction marks after second compaction (-want +got):\n%s", diff)
	}

	// A fork between the two compactions knows only the first.
	child, err := st.Fork(ctx(t), tenant, s.ID, store.ForkOptions{At: 12})
	if err != nil {
		t.Fatal(err)
	}
	want = []int64{11, 11, 11, 11, 11, 11, 0, 0, 0, 0, 0, 0, 0}
	if diff := cmp.Diff(want, compactedBy(child.ID)); diff != "" {
		t.Errorf("child compaction marks (-want +got):\n%s", diff)
	}
	_, snap, err = st.Load(ctx(t), tenant, child.ID)
	if err != nil {
		t.Fatal(err)
	}
	seqs = nil
	for _, e := range snap.Entries {
		seqs = append(seqs, e.Seq)
	}
	if snap.CompactionSeq != 11 || !slices.Equal(seqs, []int64{7, 8, 9, 10, 12, 13}) {
		t.Errorf("child resume: compaction %d, tail %v; want 11, [7 8 9 10 12 13]", snap.CompactionSeq, seqs)
	}
}

func testResumeState(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{Dir: tenant,
		Settings: transcript.Settings{Provider: "anthropic", Model: "m1", Persona: "p1", Reasoning: "high"}})

	sess, snap, err := st.Load(ctx(t), tenant, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, sess); diff != "" {
		t.Errorf("session loaded with a new session's snapshot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(transcript.Snapshot{Settings: s.Settings}, snap, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("snapshot of a new session (-want +got):\n%s", diff)
	}

	str := newStream()
	appendEntries(t, st, tenant, s.ID,
		str.add(user("hi")),
		str.add(transcript.Usage{InputTokens: 10}),
		str.add(transcript.Checkpoint{Turn: 1, Outcome: "end_turn"}),
		str.add(transcript.ProviderChange{Provider: "openai"}),
		str.add(transcript.ModelChange{Model: "m2"}),
		str.add(transcript.ReasoningChange{Effort: ""}),
		str.add(transcript.Usage{InputTokens: 25, OutputTokens: 5}),
		str.add(transcript.Checkpoint{Turn: 2, Outcome: "completed", Result: "done"}),
	)
	sess, snap, err = st.Load(ctx(t), tenant, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sess.ID != s.ID || sess.LastSeq != 8 || sess.EntryCount != 8 {
		t.Errorf("session loaded: id %s, last seq %d, %d entries; want %s, 8, 8", sess.ID, sess.LastSeq, sess.EntryCount, s.ID)
	}
	if diff := cmp.Diff(transcript.Settings{Provider: "openai", Model: "m2", Persona: "p1"}, snap.Settings); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&transcript.Usage{InputTokens: 25, OutputTokens: 5}, snap.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&transcript.Checkpoint{Turn: 2, Outcome: "completed", Result: "done"}, snap.Checkpoint); diff != "" {
		t.Errorf("checkpoint (-want +got):\n%s", diff)
	}
	if len(snap.Entries) != 8 || snap.LastSeq != 8 || snap.Compaction != nil {
		t.Errorf("snapshot: %d entries, last %d, compaction %v; want 8, 8, nil", len(snap.Entries), snap.LastSeq, snap.Compaction)
	}
	_, _, err = st.Load(ctx(t), tenant, uuid.New())
	wantErr(t, "load unknown session", err, store.ErrNotFound)
}

func testSoftDelete(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{ID: idWithPrefix("dead0000"), Dir: tenant, Label: "doomed"})
	str := newStream()
	appendEntries(t, st, tenant, s.ID, str.add(user("keep me")), str.add(assistant("kept")))
	child := create(t, st, tenant, store.NewSession{Dir: tenant, Kind: store.SessionSubagent, Parent: s.ID})
	if _, err := st.AddTrace(ctx(t), tenant, store.Trace{Session: s.ID}); err != nil {
		t.Fatal(err)
	}

	if err := st.Delete(ctx(t), tenant, s.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	c := ctx(t)
	ops := map[string]error{}
	_, ops["Session"] = st.Session(c, tenant, s.ID)
	_, ops["Resolve by id"] = st.Resolve(c, tenant, s.ID.String())
	_, ops["Resolve by prefix"] = st.Resolve(c, tenant, "dead")
	_, ops["Resolve by label"] = st.Resolve(c, tenant, "doomed")
	_, _, ops["Load"] = st.Load(c, tenant, s.ID)
	_, ops["Entries"] = st.Entries(c, tenant, s.ID)
	_, ops["Fork"] = st.Fork(c, tenant, s.ID, store.ForkOptions{})
	_, ops["Traces"] = st.Traces(c, tenant, s.ID)
	_, ops["AddTrace"] = st.AddTrace(c, tenant, store.Trace{Session: s.ID})
	_, ops["Create child"] = st.Create(c, tenant, store.NewSession{Parent: s.ID})
	ops["Append"] = st.Append(c, tenant, s.ID, []transcript.Entry{str.add(user("late"))})
	ops["SetState"] = st.SetState(c, tenant, s.ID, store.StateIdle)
	ops["Delete again"] = st.Delete(c, tenant, s.ID)
	for op, err := range ops {
		wantErr(t, op+" of a deleted session", err, store.ErrNotFound)
	}

	list, err := st.List(ctx(t), tenant, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != child.ID {
		t.Errorf("List after delete: %v, want only the child", list)
	}
	if roots := store.BuildTree(list); len(roots) != 1 || roots[0].Session.ID != child.ID {
		t.Errorf("tree after deleting the parent: child should become a root")
	}
	// The data is retained.
	all, err := st.List(ctx(t), tenant, store.ListOptions{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(x store.Session) bool { return x.ID == s.ID })
	if i < 0 {
		t.Fatalf("List with IncludeDeleted misses the deleted session")
	}
	if got := all[i]; got.DeletedAt.IsZero() || got.EntryCount != 2 || got.Label != "doomed" {
		t.Errorf("deleted session as listed: deleted at %v, %d entries, label %q", got.DeletedAt, got.EntryCount, got.Label)
	}
}

func testTenantIsolation(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	const tenantA, tenantB = "namespace-a", "namespace-b"
	a := create(t, st, tenantA, store.NewSession{ID: idWithPrefix("abcd0000"), Dir: "/a", Label: "shared"})
	str := newStream()
	es := []transcript.Entry{str.add(user("secret")), str.add(assistant("of a"))}
	appendEntries(t, st, tenantA, a.ID, es...)
	if _, err := st.AddTrace(ctx(t), tenantA, store.Trace{Session: a.ID}); err != nil {
		t.Fatal(err)
	}
	b := create(t, st, tenantB, store.NewSession{Dir: "/b", Label: "shared"})

	c := ctx(t)
	notFound := map[string]error{}
	_, notFound["Session"] = st.Session(c, tenantB, a.ID)
	_, notFound["Resolve by id"] = st.Resolve(c, tenantB, a.ID.String())
	_, notFound["Resolve by prefix"] = st.Resolve(c, tenantB, "abcd")
	_, _, notFound["Load"] = st.Load(c, tenantB, a.ID)
	_, notFound["Entries"] = st.Entries(c, tenantB, a.ID)
	_, notFound["Fork"] = st.Fork(c, tenantB, a.ID, store.ForkOptions{})
	_, notFound["Traces"] = st.Traces(c, tenantB, a.ID)
	_, notFound["AddTrace"] = st.AddTrace(c, tenantB, store.Trace{Session: a.ID})
	_, notFound["Create child"] = st.Create(c, tenantB, store.NewSession{Parent: a.ID})
	notFound["Append"] = st.Append(c, tenantB, a.ID, []transcript.Entry{str.add(user("injected"))})
	notFound["Append large batch"] = st.Append(c, tenantB, a.ID, func() []transcript.Entry {
		var batch []transcript.Entry
		for range 100 {
			batch = append(batch, str.add(user("injected")))
		}
		return batch
	}())
	notFound["SetState"] = st.SetState(c, tenantB, a.ID, store.StateIdle)
	notFound["Delete"] = st.Delete(c, tenantB, a.ID)
	for op, err := range notFound {
		wantErr(t, op+" across tenants", err, store.ErrNotFound)
	}

	// Each tenant sees only its own session, even under the same label.
	for _, tc := range []struct {
		tenant string
		want   uuid.UUID
	}{{tenantA, a.ID}, {tenantB, b.ID}} {
		got, err := st.Resolve(c, tc.tenant, "shared")
		if err != nil || got.ID != tc.want {
			t.Errorf("Resolve(shared) in %s = %s, %v; want %s", tc.tenant, got.ID, err, tc.want)
		}
		list, err := st.List(c, tc.tenant, store.ListOptions{IncludeDeleted: true})
		if err != nil || len(list) != 1 || list[0].ID != tc.want {
			t.Errorf("List in %s = %v, %v; want only %s", tc.tenant, list, err, tc.want)
		}
	}
	if none, err := st.List(c, "namespace-c", store.ListOptions{IncludeDeleted: true}); err != nil || len(none) != 0 {
		t.Errorf("List in an unused tenant = %v, %v; want nothing", none, err)
	}

	// Tenant A's session is untouched by everything B tried.
	if diff := cmp.Diff(es, entries(t, st, tenantA, a.ID), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("tenant A's entries changed (-want +got):\n%s", diff)
	}
	got := session(t, st, tenantA, a.ID)
	if got.State != store.StateActive || !got.DeletedAt.IsZero() || got.EntryCount != 2 {
		t.Errorf("tenant A's session changed: %+v", got)
	}
	if traces, err := st.Traces(c, tenantA, a.ID); err != nil || len(traces) != 1 {
		t.Errorf("tenant A's traces: %d, %v; want 1", len(traces), err)
	}
}

func testSetState(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{Dir: tenant, State: store.StateIdle})
	for _, state := range []store.State{store.StateActive, store.StateCompleted, store.StateFailed, store.StateCancelled, store.StateIdle} {
		if err := st.SetState(ctx(t), tenant, s.ID, state); err != nil {
			t.Fatalf("SetState(%s): %v", state, err)
		}
		if got := session(t, st, tenant, s.ID); got.State != state || got.UpdatedAt.Before(s.UpdatedAt) {
			t.Errorf("after SetState(%s): state %s, updated %v", state, got.State, got.UpdatedAt)
		}
	}
	wantErr(t, "unknown state", st.SetState(ctx(t), tenant, s.ID, "asleep"), store.ErrInvalid)
	wantErr(t, "unknown session", st.SetState(ctx(t), tenant, uuid.New(), store.StateIdle), store.ErrNotFound)
}

// testToolOutputs keeps the full output of tool calls by session and call
// id, byte-exact (NUL bytes and invalid UTF-8 included), replaced when the
// same call is kept again, and scoped like the sessions.
func testToolOutputs(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{Dir: tenant})
	other := create(t, st, tenant, store.NewSession{Dir: tenant})
	big := bytes.Repeat([]byte("héllo\x00\xff\xfe wörld\n"), 1<<16)
	for call, data := range map[string][]byte{"toolu_01": big, "call/2": []byte("second"), "empty": {}} {
		if err := st.PutToolOutput(ctx(t), tenant, s.ID, call, data); err != nil {
			t.Fatalf("PutToolOutput %s: %v", call, err)
		}
	}
	get := func(tenant string, id uuid.UUID, call string) ([]byte, error) {
		return st.ToolOutput(ctx(t), tenant, id, call)
	}
	if got, err := get(tenant, s.ID, "toolu_01"); err != nil || !bytes.Equal(got, big) {
		t.Errorf("ToolOutput = %d bytes, %v; want the %d bytes kept", len(got), err, len(big))
	}
	if got, err := get(tenant, s.ID, "empty"); err != nil || len(got) != 0 {
		t.Errorf("ToolOutput(empty) = %q, %v", got, err)
	}
	if err := st.PutToolOutput(ctx(t), tenant, s.ID, "call/2", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if got, err := get(tenant, s.ID, "call/2"); err != nil || string(got) != "replaced" {
		t.Errorf("ToolOutput after a second put = %q, %v", got, err)
	}
	for name, c := range map[string]struct {
		tenant string
		id     uuid.UUID
		call   string
	}{
		"unknown call":    {tenant, s.ID, "nosuch"},
		"another session": {tenant, other.ID, "toolu_01"},
		"another tenant":  {"/elsewhere", s.ID, "toolu_01"},
		"unknown session": {tenant, uuid.New(), "toolu_01"},
	} {
		if _, err := get(c.tenant, c.id, c.call); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: ToolOutput err = %v, want ErrNotFound", name, err)
		}
	}
	if err := st.PutToolOutput(ctx(t), "/elsewhere", s.ID, "x", []byte("x")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutToolOutput in another tenant: %v, want ErrNotFound", err)
	}
	if err := st.PutToolOutput(ctx(t), tenant, uuid.New(), "x", []byte("x")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutToolOutput of an unknown session: %v, want ErrNotFound", err)
	}
	if err := st.Delete(ctx(t), tenant, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := get(tenant, s.ID, "toolu_01"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ToolOutput of a deleted session: %v, want ErrNotFound", err)
	}
}

// testMemories keeps memory documents by tenant, scope and target,
// byte-exact, outside every session: they outlive the sessions that wrote
// them, and each tenant sees its own.
func testMemories(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	const scope = "https://git.example/team/app.git"
	if data, v, err := st.Memory(ctx(t), tenant, scope, "MEMORY.md"); err != nil || v != 0 || len(data) != 0 {
		t.Fatalf("Memory of nothing stored = %q, %d, %v; want no data, version 0", data, v, err)
	}
	doc := []byte("# Project memory\n\n- run make test\x00\xff\n")
	if ok, err := st.PutMemory(ctx(t), tenant, scope, "MEMORY.md", doc, 0); err != nil || !ok {
		t.Fatalf("first PutMemory = %v, %v; want stored", ok, err)
	}
	data, v, err := st.Memory(ctx(t), tenant, scope, "MEMORY.md")
	if err != nil || v != 1 || !bytes.Equal(data, doc) {
		t.Fatalf("Memory = %q, %d, %v; want the document at version 1", data, v, err)
	}
	// A session that wrote it is deleted: the memory stays.
	s := create(t, st, tenant, store.NewSession{Dir: tenant})
	if err := st.Delete(ctx(t), tenant, s.ID); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.PutMemory(ctx(t), tenant, scope, "MEMORY.md", []byte("second"), v); err != nil || !ok {
		t.Fatalf("PutMemory at version %d = %v, %v; want stored", v, ok, err)
	}
	if data, v, err := st.Memory(ctx(t), tenant, scope, "MEMORY.md"); err != nil || v != 2 || string(data) != "second" {
		t.Errorf("Memory after the second put = %q, %d, %v; want %q at version 2", data, v, err, "second")
	}
	for name, c := range map[string]struct{ tenant, scope, target string }{
		"another tenant": {"/elsewhere", scope, "MEMORY.md"},
		"another scope":  {tenant, scope + "/other", "MEMORY.md"},
		"the user scope": {tenant, "", "MEMORY.md"},
		"another target": {tenant, scope, "USER.md"},
	} {
		if data, v, err := st.Memory(ctx(t), c.tenant, c.scope, c.target); err != nil || v != 0 || data != nil {
			t.Errorf("%s: Memory = %q, %d, %v; want nothing", name, data, v, err)
		}
	}
	if ok, err := st.PutMemory(ctx(t), tenant, "", "USER.md", nil, 0); err != nil || !ok {
		t.Errorf("PutMemory of an empty document = %v, %v; want stored", ok, err)
	}
	if data, v, err := st.Memory(ctx(t), tenant, "", "USER.md"); err != nil || v != 1 || len(data) != 0 {
		t.Errorf("Memory of the empty document = %q, %d, %v; want empty at version 1", data, v, err)
	}
	_, _, err = st.Memory(ctx(t), "", scope, "MEMORY.md")
	wantErr(t, "Memory of an empty tenant", err, store.ErrInvalid)
	_, err = st.PutMemory(ctx(t), tenant, scope, "", []byte("x"), 0)
	wantErr(t, "PutMemory of an empty target", err, store.ErrInvalid)
	_, err = st.PutMemory(ctx(t), tenant, scope, "MEMORY.md", []byte("x"), -1)
	wantErr(t, "PutMemory of a negative version", err, store.ErrInvalid)
}

// testMemoryCompareAndSwap refuses a write whose version is not the stored
// one, and so keeps every change of writers that read, change, put and
// read again when refused: none is lost.
func testMemoryCompareAndSwap(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	const scope, target = "app", "MEMORY.md"
	if ok, err := st.PutMemory(ctx(t), tenant, scope, target, []byte("a"), 0); err != nil || !ok {
		t.Fatalf("PutMemory = %v, %v", ok, err)
	}
	for _, stale := range []int64{0, 2, 7} {
		if ok, err := st.PutMemory(ctx(t), tenant, scope, target, []byte("stale"), stale); err != nil || ok {
			t.Errorf("PutMemory at stale version %d = %v, %v; want refused", stale, ok, err)
		}
	}
	if data, v, _ := st.Memory(ctx(t), tenant, scope, target); string(data) != "a" || v != 1 {
		t.Fatalf("after refused puts: %q at version %d, want %q at 1", data, v, "a")
	}
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				for {
					data, v, err := st.Memory(ctx(t), tenant, scope, target)
					if err != nil {
						errs <- err
						return
					}
					next := append(slices.Clip(data), fmt.Sprintf(",%d.%d", w, i)...)
					ok, err := st.PutMemory(ctx(t), tenant, scope, target, next, v)
					if err != nil && !errors.Is(err, store.ErrTransient) {
						errs <- err
						return
					}
					if ok {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	data, v, err := st.Memory(ctx(t), tenant, scope, target)
	if err != nil {
		t.Fatal(err)
	}
	if v != 1+writers*each {
		t.Errorf("version = %d, want %d: one per stored write", v, 1+writers*each)
	}
	for w := range writers {
		for i := range each {
			if !bytes.Contains(data, fmt.Appendf(nil, ",%d.%d", w, i)) {
				t.Errorf("the change %d.%d is lost: %q", w, i, data)
			}
		}
	}
}

func testTraces(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{Dir: tenant})
	str := newStream()
	appendEntries(t, st, tenant, s.ID, str.add(user("question")), str.add(assistant("aggregated")))
	var want []store.Trace
	for i := range 3 {
		tr, err := st.AddTrace(ctx(t), tenant, store.Trace{
			Session: s.ID,
			Seq:     2,
			CallID:  fmt.Sprintf("call_%d", i),
			Proposals: []store.TraceCall{
				{Provider: "anthropic", Model: "a", Output: fmt.Sprintf("proposal %d", i), InputTokens: 10, Duration: time.Second},
				{Provider: "openai", Model: "b", Error: "rate limited"},
			},
			Aggregate: store.TraceCall{Provider: "anthropic", Model: "agg", Output: "aggregated", OutputTokens: 7},
		})
		if err != nil {
			t.Fatal(err)
		}
		if tr.ID == uuid.Nil || tr.CreatedAt.IsZero() {
			t.Errorf("AddTrace did not fill id and time: %+v", tr)
		}
		want = append(want, tr)
	}
	got, err := st.Traces(ctx(t), tenant, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Traces (-added +listed):\n%s", diff)
	}
	// Traces are not entries.
	if n := len(entries(t, st, tenant, s.ID)); n != 2 {
		t.Errorf("session has %d entries after adding traces, want 2", n)
	}
	_, err = st.AddTrace(ctx(t), tenant, store.Trace{Session: uuid.New()})
	wantErr(t, "trace of unknown session", err, store.ErrNotFound)
}

func testEmptyTenant(t *testing.T, newURL func(t *testing.T) string) {
	st := open(t, newURL(t))
	s := create(t, st, tenant, store.NewSession{Dir: tenant})
	c := ctx(t)
	errs := map[string]error{}
	_, errs["Create"] = st.Create(c, "", store.NewSession{})
	_, errs["Session"] = st.Session(c, "", s.ID)
	_, errs["List"] = st.List(c, "", store.ListOptions{})
	_, errs["Resolve"] = st.Resolve(c, "", s.ID.String())
	_, _, errs["Load"] = st.Load(c, "", s.ID)
	_, errs["Entries"] = st.Entries(c, "", s.ID)
	_, errs["Fork"] = st.Fork(c, "", s.ID, store.ForkOptions{})
	_, errs["AddTrace"] = st.AddTrace(c, "", store.Trace{Session: s.ID})
	_, errs["Traces"] = st.Traces(c, "", s.ID)
	errs["Append"] = st.Append(c, "", s.ID, []transcript.Entry{{Seq: 1, Payload: user("x")}})
	errs["SetState"] = st.SetState(c, "", s.ID, store.StateIdle)
	errs["Delete"] = st.Delete(c, "", s.ID)
	for op, err := range errs {
		wantErr(t, op+" with an empty tenant", err, store.ErrInvalid)
	}
}
