package agent

import (
	"path/filepath"
	"testing"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/journal"
	"github.com/aerie-run/aerie/runner/provider"
	"github.com/aerie-run/aerie/runner/provider/anthropic"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/store/dburl"
	"github.com/aerie-run/aerie/runner/tools"
	"github.com/aerie-run/aerie/runner/transcript"
)

// TestLoopResumesAfterCompaction runs a long task journaled to a SQLite
// file, then resumes it as a new run would: the store gives back the
// replacement and the active tail, the resumed loop continues from them and
// compacts them again, and every step runs once.
func TestLoopResumesAfterCompaction(t *testing.T) {
	t.Parallel()
	const window = 32_000
	ctx := t.Context()
	st, err := dburl.Open(ctx, filepath.Join(t.TempDir(), "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	sess, err := st.Create(ctx, "t", store.NewSession{Dir: "/"})
	if err != nil {
		t.Fatal(err)
	}

	ms := testenv.StartModelServer(t, longTask(60, "Steps built so far: all those above.")...)
	ms.SetContextWindow(testenv.ContextWindow{Tokens: window})
	model, err := anthropic.New(provider.Config{Provider: "anthropic", Model: "claude-test", APIKey: "k", BaseURL: ms.URL(), MaxOutputTokens: 4_000})
	if err != nil {
		t.Fatal(err)
	}
	b := &build{resultBytes: 6_000, runs: map[int]int{}}
	reg, err := tools.NewRegistry(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	run := func(snap transcript.Snapshot, prompt string, stop []StopCondition) Result {
		t.Helper()
		w := journal.New(ctx, st, "t", sess.ID, snap.LastSeq+1, journal.Options{})
		history, seqs := HistoryWithSeqs(snap)
		var usage transcript.Usage
		if snap.Usage != nil {
			usage = *snap.Usage
		}
		policy := compaction.New(compaction.Config{Window: compaction.UsableWindow(window, 4_000), Summarizer: model})
		r := New(Config{Model: model, Tools: reg, Journal: w, Compactor: policy, HistorySeqs: seqs, Stop: stop}, history, usage).Run(ctx, prompt)
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return r
	}
	load := func() transcript.Snapshot {
		t.Helper()
		_, snap, err := st.Load(ctx, "t", sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}

	// The first run stops halfway through, after compacting.
	if r := run(transcript.Snapshot{}, "Build every step.", []StopCondition{MaxTurns(30)}); r.Outcome != transcript.OutcomeBudgetExceeded {
		t.Fatalf("first run: %s: %s", r.Outcome, r.Reason)
	}
	snap := load()
	if snap.Compaction == nil {
		t.Fatal("no compaction stored")
	}
	if first := snap.Entries[0].Seq; first != snap.Compaction.FirstKept {
		t.Errorf("the active entries start at %d, the compaction keeps from %d", first, snap.Compaction.FirstKept)
	}
	firstCompaction := snap.CompactionSeq

	// The second continues from the replacement and the tail, to the end.
	if r := run(snap, "", nil); r.Outcome != transcript.OutcomeCompleted {
		t.Fatalf("resumed run: %s: %s", r.Outcome, r.Reason)
	}
	checkEveryStepOnce(t, b, 60)
	snap = load()
	if snap.Compaction == nil || snap.CompactionSeq <= firstCompaction {
		t.Fatalf("the resumed run did not compact: latest compaction at %d, the first at %d", snap.CompactionSeq, firstCompaction)
	}
	if first := snap.Entries[0].Seq; first != snap.Compaction.FirstKept {
		t.Errorf("the active entries start at %d, the compaction keeps from %d", first, snap.Compaction.FirstKept)
	}
	all, err := st.Entries(ctx, "t", sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range all {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has sequence number %d: the stream is not contiguous", i+1, e.Seq)
		}
	}
	for i, req := range ms.Requests() {
		if req.Overflow {
			t.Errorf("request %d overflowed", i+1)
		}
	}
}
