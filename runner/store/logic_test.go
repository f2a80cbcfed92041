package store

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/transcript"
)

func TestCheckCut(t *testing.T) {
	t.Parallel()
	call := func(seq int64, id string) transcript.Entry {
		return transcript.Entry{Seq: seq, Payload: transcript.ToolCall{CallID: id, Name: "bash"}}
	}
	done := func(seq int64, id string) transcript.Entry {
		return transcript.Entry{Seq: seq, Payload: transcript.ToolCompletion{CallID: id, Status: transcript.ToolOK}}
	}
	tools := []transcript.Entry{call(2, "a"), done(4, "a"), call(5, "b"), call(6, "c"), done(7, "c"), done(9, "b")}
	tests := []struct {
		at   int64
		open string // the open calls named in the error, "" for a valid cut
	}{
		{at: 1}, {at: 4}, {at: 9}, {at: 12},
		{at: 2, open: "a (entry 2)"},
		{at: 3, open: "a (entry 2)"},
		{at: 5, open: "b (entry 5)"},
		{at: 6, open: "b (entry 5), c (entry 6)"},
		{at: 8, open: "b (entry 5)"},
	}
	for _, tt := range tests {
		err := checkCut(tools, tt.at)
		switch {
		case tt.open == "" && err != nil:
			t.Errorf("checkCut(%d) = %v, want a valid cut", tt.at, err)
		case tt.open != "" && !errors.Is(err, ErrInvalidCut):
			t.Errorf("checkCut(%d) = %v, want ErrInvalidCut", tt.at, err)
		case tt.open != "":
			want := fmt.Sprintf("cut at %d is inside open tool calls %s: invalid fork cut", tt.at, tt.open)
			if err.Error() != want {
				t.Errorf("checkCut(%d) = %q, want %q", tt.at, err, want)
			}
		}
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	a := Session{ID: uuid.MustParse("aaaa1111-0000-4000-8000-000000000001"), Label: "main"}
	b := Session{ID: uuid.MustParse("aaaa2222-0000-4000-8000-000000000002"), Label: "twin"}
	c := Session{ID: uuid.MustParse("bbbb0000-0000-4000-8000-000000000003"), Label: "twin"}
	d := Session{ID: uuid.MustParse("cccc0000-0000-4000-8000-000000000004"), Label: "aaaa1"}
	all := []Session{a, b, c, d}
	tests := []struct {
		ref  string
		want uuid.UUID
		err  error
	}{
		{ref: a.ID.String(), want: a.ID},
		{ref: "{" + a.ID.String() + "}", want: a.ID},
		{ref: "AAAA2", want: b.ID},
		{ref: "main", want: a.ID},
		{ref: "aaaa1", err: ErrAmbiguous},
		{ref: "twin", err: ErrAmbiguous},
		{ref: "a", err: ErrAmbiguous},
		{ref: "zzz", err: ErrNotFound},
		{ref: "", err: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			t.Parallel()
			got, err := resolve(all, tt.ref)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Errorf("resolve(%q) = %v, %v; want %v", tt.ref, got.ID, err, tt.err)
				}
				return
			}
			if err != nil || got.ID != tt.want {
				t.Errorf("resolve(%q) = %v, %v; want %v", tt.ref, got.ID, err, tt.want)
			}
		})
	}
}

func TestAmbiguousErrorListsCandidates(t *testing.T) {
	t.Parallel()
	a := Session{ID: uuid.MustParse("aaaa1111-0000-4000-8000-000000000001"), Label: "main"}
	b := Session{ID: uuid.MustParse("aaaa2222-0000-4000-8000-000000000002")}
	_, err := resolve([]Session{b, a}, "aaaa")
	want := `session reference "aaaa" matches 2 sessions: aaaa1111-0000-4000-8000-000000000001 (main); aaaa2222-0000-4000-8000-000000000002; use more of the id`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestBuildTree(t *testing.T) {
	t.Parallel()
	at := func(min int) time.Time { return time.Date(2026, 1, 1, 0, min, 0, 0, time.UTC) }
	id := func(n byte) uuid.UUID { return uuid.UUID{15: n} }
	sessions := []Session{
		{ID: id(4), ParentID: id(2), CreatedAt: at(4), Label: "grandchild"},
		{ID: id(1), CreatedAt: at(1), Label: "root"},
		{ID: id(3), ParentID: id(1), CreatedAt: at(3), Label: "second child"},
		{ID: id(2), ParentID: id(1), CreatedAt: at(2), Label: "first child"},
		{ID: id(5), ParentID: id(9), CreatedAt: at(0), Label: "orphan"}, // parent deleted
	}
	type node struct {
		Label    string
		Children []node
	}
	var shape func([]*Node) []node
	shape = func(ns []*Node) []node {
		var out []node
		for _, n := range ns {
			out = append(out, node{n.Session.Label, shape(n.Children)})
		}
		return out
	}
	want := []node{
		{Label: "orphan"},
		{Label: "root", Children: []node{
			{Label: "first child", Children: []node{{Label: "grandchild"}}},
			{Label: "second child"},
		}},
	}
	if diff := cmp.Diff(want, shape(BuildTree(sessions))); diff != "" {
		t.Errorf("BuildTree (-want +got):\n%s", diff)
	}
}

func TestRowBatchSortsBySeq(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		seqs []int64
	}{
		{name: "empty"},
		{name: "in order", seqs: []int64{1, 2, 3, 5, 8}},
		{name: "dense", seqs: []int64{3, 1, 2, 6, 4, 5}},
		{name: "gaps", seqs: []int64{40, 7, 12, 9, 30}},
		{name: "sparse", seqs: []int64{1 << 40, 3, 1 << 20, 2}},
		{name: "repeated", seqs: []int64{5, 3, 5, 4, 3}},
		{name: "extremes", seqs: []int64{math.MaxInt64, 0, math.MinInt64, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newEntryRows(uuid.Nil, int64(len(tt.seqs)))
			for i, seq := range tt.seqs {
				// The payload tells rows with the same number apart.
				b.Add(seq, []byte("model_change"), fmt.Sprintf(`{"model":"m%d"}`, i), time.Time{}, 0)
			}
			b.sort()
			var got, want []int64
			payloads := map[string]bool{}
			for _, r := range b.rows {
				got = append(got, r.seq)
				payloads[r.payload] = true
			}
			want = append(want, tt.seqs...)
			slices.Sort(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("sorted numbers (-want +got):\n%s", diff)
			}
			if len(payloads) != len(tt.seqs) {
				t.Errorf("sorting kept %d distinct rows of %d", len(payloads), len(tt.seqs))
			}
		})
	}
}

// TestRowBatch decodes batches of rows read out of order, split between
// decoding goroutines, with and without corrupt rows, on one core and on
// several.
func TestRowBatch(t *testing.T) {
	session := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	const n = 5*parallelDecodeMin + 17
	// A fixed shuffle: runs of descending numbers among ascending ones.
	seqs := make([]int64, 0, n)
	for i := int64(1); i <= n; i += 10 {
		for j := min(i+9, n); j >= i; j-- {
			seqs = append(seqs, j)
		}
	}
	payload := func(seq int64) string { return fmt.Sprintf(`{"model":"m%d"}`, seq) }
	tests := []struct {
		name    string
		corrupt []int64 // rows whose payload is corrupt
		procs   int
	}{
		{name: "whole", procs: 2},
		{name: "whole on one core", procs: 1},
		{name: "corrupt", corrupt: []int64{n - 3, 2*parallelDecodeMin + 5, 700, n}, procs: 2},
		{name: "corrupt on one core", corrupt: []int64{n - 3, 2*parallelDecodeMin + 5, 700, n}, procs: 1},
		{name: "corrupt first", corrupt: []int64{1}, procs: 2},
		{name: "corrupt last", corrupt: []int64{n}, procs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tt.procs))
			b := newEntryRows(session, n)
			for _, seq := range seqs {
				p := payload(seq)
				if slices.Contains(tt.corrupt, seq) {
					p = `{"model":`
				}
				b.Add(seq, []byte("model_change"), p, time.Unix(seq, 0), 0)
			}
			entries, err := b.decode()
			if len(tt.corrupt) > 0 {
				var entryErr *transcript.EntryError
				if !errors.As(err, &entryErr) || !errors.Is(err, transcript.ErrCorruptEntry) {
					t.Fatalf("decode = %v, want a corrupt entry error", err)
				}
				if want := slices.Min(tt.corrupt); entryErr.Seq != want || entryErr.Session != session {
					t.Errorf("error names session %s entry %d, want %s entry %d", entryErr.Session, entryErr.Seq, session, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != n {
				t.Fatalf("decoded %d entries, want %d", len(entries), n)
			}
			for i, e := range entries {
				seq := int64(i + 1)
				want := transcript.Entry{Seq: seq, Payload: transcript.ModelChange{Model: fmt.Sprintf("m%d", seq)}, CreatedAt: time.Unix(seq, 0)}
				if diff := cmp.Diff(want, e); diff != "" {
					t.Fatalf("entry %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}
