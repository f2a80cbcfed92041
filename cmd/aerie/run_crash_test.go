package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-run/aerie/hack/testenv"
	"github.com/aerie-run/aerie/runner/transcript"
)

// crashSteps is the length of the session TestRunCrashResume kills.
const crashSteps = 10

// crashModel is a model that works through crashSteps steps, one shell
// command each, and decides what to do next from the conversation it is
// sent, as a real model would: after the last step it sees itself call,
// the next one, unless that call's result says it was not run, when it
// calls the step again. A call whose record was lost in a crash, or that
// is answered as not run although it ran, is therefore made again, and its
// command runs again.
func crashModel(t *testing.T, req testenv.ModelRequest) testenv.Turn {
	next, err := testenv.NextStep(req)
	if err != nil {
		t.Errorf("decode the request: %v", err)
	}
	turn := answer("all steps done")
	if next <= crashSteps {
		// The call id is new at every request, so that a call made again is
		// told apart from the first. The command goes on working after it
		// has written its line, as most commands do.
		id := fmt.Sprintf("step%d-%d", next, req.Turn)
		turn = toolTurn(call(id, "bash", map[string]any{"command": fmt.Sprintf("echo step%d >> steps.log && sleep 0.1", next)}))
	}
	turn.Delay = 150 * time.Millisecond
	return turn
}

// TestRunCrashResume kills `aerie run` with SIGKILL at seeded random moments
// of a ten-step session and resumes it after each kill. Every step's command
// must have run exactly once, unless the resumed session answered its call as
// interrupted (then at most once): a call whose command may have started is
// never made again without the model being told, and every call the journal
// holds has its result and completion there.
func TestRunCrashResume(t *testing.T) {
	t.Parallel()
	turns := make([]testenv.Turn, 200)
	for i := range turns {
		turns[i] = testenv.Turn{Respond: func(req testenv.ModelRequest) testenv.Turn { return crashModel(t, req) }}
	}
	e := newE2E(t, turns...)
	rng := rand.New(rand.NewPCG(20, 1))
	const kills = 20
	completed := false
	for i := 0; i < kills && !completed; i++ {
		args := []string{"run", "--resume", "crashy"}
		if !e.sessionStored("crashy") {
			args = []string{"run", "--label", "crashy", "work through the steps"}
		}
		asked := len(e.model.Requests())
		cmd, stdout, stderr := e.start(args...)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// The moment is drawn from the run's first model request on, over
		// about two steps of the session: the model's answer, the command
		// and the journal's writes in between.
		delay := time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
		for start := time.Now(); len(e.model.Requests()) == asked && time.Since(start) < 30*time.Second; {
			time.Sleep(time.Millisecond)
		}
		select {
		case err := <-exited:
			out := e.output(err, stdout.String(), stderr.String())
			if out.code != 0 {
				t.Fatalf("run %d exited %d before it was killed; stderr:\n%s", i, out.code, out.stderr)
			}
			completed = true
		case <-time.After(delay):
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err != nil {
				t.Logf("run %d: %v", i, err) // the kill, unless it had just exited
			}
		}
	}
	if !completed {
		if out := e.run("run", "--resume", "crashy"); out.code != 0 {
			t.Fatalf("the last resume exited %d; stderr:\n%s", out.code, out.stderr)
		}
	}

	b, err := os.ReadFile(filepath.Join(e.ws, "steps.log"))
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{} // step → times its command wrote its line
	for _, line := range strings.Fields(string(b)) {
		ran[line]++
	}
	sess, err := e.store().Resolve(t.Context(), e.ws, "crashy")
	if err != nil {
		t.Fatal(err)
	}
	sc := testenv.ReadStepCalls(e.entries(sess.ID.String()))
	calls, results, completions := sc.Calls, sc.Results, sc.Completions
	interruptions := 0
	for i := 1; i <= crashSteps; i++ {
		step := fmt.Sprintf("step%d", i)
		interrupted := false
		for j, id := range calls[step] {
			res, answered := results[id]
			switch {
			case !answered:
				t.Errorf("call %s has no result in the journal", id)
			case completions[id] == "":
				t.Errorf("call %s has no completion in the journal", id)
			case completions[id] == transcript.ToolInterrupted:
				interrupted = true
				interruptions++
				if !strings.Contains(res, "may have partly run") {
					t.Errorf("interrupted call %s was answered %q", id, res)
				}
			case j < len(calls[step])-1 && !strings.HasPrefix(res, "not run"):
				t.Errorf("%s was called again after call %s was answered %q", step, id, res)
			}
		}
		switch {
		case len(calls[step]) == 0:
			t.Errorf("%s was never called", step)
		case interrupted && ran[step] > 1:
			t.Errorf("%s was interrupted and ran %d times, want at most once; calls %v", step, ran[step], calls[step])
		case !interrupted && ran[step] != 1:
			t.Errorf("%s ran %d times, want once; calls %v, results %v", step, ran[step], calls[step], results)
		}
	}
	if interruptions == 0 {
		t.Error("no kill interrupted a command: the session was not put to the test")
	}
}

// sessionStored reports whether the session labelled label exists: a run
// killed before it stored its new session left nothing to resume.
func (e *e2e) sessionStored(label string) bool {
	e.t.Helper()
	if _, err := os.Stat(filepath.Join(e.home, "sessions.db")); err != nil {
		return false
	}
	_, err := e.store().Resolve(e.t.Context(), e.ws, label)
	return err == nil
}

// TestRunCrashWhileSessionStarts kills `aerie run` with SIGKILL at moments
// spread over its start, before and after its new session is stored and
// its first model request goes out, and then resumes every session a
// killed run left. A session that was stored holds its prompt, once, and
// its resume completes with the prompt sent to the model; a run killed
// before it stored its session left nothing.
func TestRunCrashWhileSessionStarts(t *testing.T) {
	t.Parallel()
	// The model answers a run that is to be killed only after it is
	// killed, and a resume at once.
	var resuming atomic.Bool
	turns := make([]testenv.Turn, 200)
	for i := range turns {
		turns[i] = testenv.Turn{Respond: func(testenv.ModelRequest) testenv.Turn {
			if resuming.Load() {
				return answer("done")
			}
			return testenv.Turn{Text: "too late", Delay: time.Minute}
		}}
	}
	e := newE2E(t, turns...)
	// Layers whose digests take a while: the journal's first entry
	// records them, so a session's row can be stored well before that
	// entry, unless they are stored together.
	blob := bytes.Repeat([]byte("aerie"), 12<<20) // under a layer's digest cap
	for _, dir := range []string{filepath.Join(e.ws, ".aerie"), filepath.Join(e.ws, ".osprey"), filepath.Join(e.home, "skills")} {
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data", "blob"), blob, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A first run creates the database, as it exists in real use.
	resuming.Store(true)
	var toRequest time.Duration // the last start's time up to its first request
	if out := e.run("run", "--label", "first", "create the database"); out.code != 0 {
		t.Fatalf("the first run exited %d; stderr:\n%s", out.code, out.stderr)
	}
	resuming.Store(false)

	const kills = 24
	prompts := map[string]string{} // label → prompt
	for i := range kills {
		label, prompt := fmt.Sprintf("start%d", i), fmt.Sprintf("task number %d", i)
		prompts[label] = prompt
		asked, start := len(e.model.Requests()), time.Now()
		cmd, stdout, stderr := e.start("run", "--label", label, prompt)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// Two runs in three are killed before their first request, from
		// a quarter of the last start's time up to it; the third from
		// the moment the request arrives to 64ms after it, and it times
		// the start.
		var kill <-chan time.Time
		if n := i / 3 * 2; i%3 != 2 && toRequest > 0 {
			kill = time.After(time.Duration(int64(toRequest) * int64(kills+3*(n+i%3)) / int64(4*kills)))
		} else {
			for len(e.model.Requests()) == asked && time.Since(start) < time.Minute {
				time.Sleep(time.Millisecond)
			}
			if reqs := e.model.Requests(); len(reqs) > asked {
				toRequest = reqs[asked].Time.Sub(start)
			}
			kill = time.After(time.Millisecond << (i / 3) / 2)
		}
		select {
		case err := <-exited:
			out := e.output(err, stdout.String(), stderr.String())
			t.Fatalf("run %d exited %d before it was killed; stderr:\n%s", i, out.code, out.stderr)
		case <-kill:
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := <-exited; err == nil {
				t.Logf("run %d had exited by itself when it was killed", i)
			}
		}
	}

	resuming.Store(true)
	stored := 0
	for i := range kills {
		label := fmt.Sprintf("start%d", i)
		if e.sessionStored(label) {
			stored++
			e.resumeStarted(label, prompts[label])
		}
	}
	t.Logf("%d of %d killed runs had stored their session; the last start up to the first request took %v", stored, kills, toRequest)
	if stored == 0 {
		t.Error("no killed run had stored its session: the test did not reach the moments it is about")
	}
}

// resumeStarted resumes the session labelled label, killed while it
// started: the resume must complete and send the model the session's
// prompt, which the session then holds once, in an unbroken stream.
func (e *e2e) resumeStarted(label, prompt string) {
	t := e.t
	t.Helper()
	asked := len(e.model.Requests())
	out := e.run("run", "--resume", label)
	if out.code != 0 {
		t.Errorf("resume of %s exited %d; stderr:\n%s", label, out.code, out.stderr)
		return
	}
	reqs := e.model.Requests()[asked:]
	if len(reqs) == 0 {
		t.Fatalf("resume of %s made no model request", label)
	}
	var req anthropicRequest
	if err := reqs[0].Decode(&req); err != nil {
		t.Fatal(err)
	}
	if len(req.Messages) == 0 || len(req.Messages[0].Content) == 0 || req.Messages[0].Content[0].Text != prompt {
		t.Errorf("resume of %s sent %+v, want the prompt %q first", label, req.Messages, prompt)
	}
	sess, err := e.store().Resolve(t.Context(), e.ws, label)
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for j, en := range e.entries(sess.ID.String()) {
		if en.Seq != int64(j+1) {
			t.Errorf("%s: entry %d has sequence number %d", label, j, en.Seq)
		}
		if u, ok := en.Payload.(transcript.UserMessage); ok && len(u.Content) > 0 {
			users = append(users, u.Content[0].Text)
		}
	}
	if len(users) != 1 || users[0] != prompt {
		t.Errorf("%s holds the user messages %q, want its prompt once", label, users)
	}
}
