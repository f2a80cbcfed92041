package compaction_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/aerie-run/aerie/runner/compaction"
	"github.com/aerie-run/aerie/runner/provider"
)

func TestRender(t *testing.T) {
	t.Parallel()
	msgs := []provider.Message{
		provider.UserMessage("Fix the test."),
		{Role: provider.RoleAssistant, Content: []provider.Content{
			{Type: provider.ContentReasoning, Text: "private thoughts"},
			provider.Text("Running it."),
			provider.ToolCall("c1", "bash", `{"command":"go test"}`),
		}},
		{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("c1", "FAIL", true)}},
	}
	want := "[user]\nFix the test.\n\n" +
		"[assistant]\nRunning it.\n[tool call c1 bash] {\"command\":\"go test\"}\n\n" +
		"[tool\n" // the role line, checked below in full
	got := compaction.Render(msgs, compaction.MaxSummaryInput)
	if !strings.HasPrefix(got, want[:len(want)-len("[tool\n")]) {
		t.Errorf("Render =\n%s", got)
	}
	if !strings.Contains(got, "[tool]\n[tool result c1, failed]\nFAIL\n") {
		t.Errorf("the failed result is not rendered as such:\n%s", got)
	}
	if strings.Contains(got, "private thoughts") {
		t.Error("reasoning is rendered")
	}
}

func TestRenderLimits(t *testing.T) {
	t.Parallel()
	// One large result keeps its head and tail.
	long := "HEAD" + strings.Repeat("é", 20_000) + "TAIL"
	one := compaction.Render([]provider.Message{{Role: provider.RoleTool, Content: []provider.Content{provider.ToolResult("c", long, false)}}}, compaction.MaxSummaryInput)
	if !strings.Contains(one, "HEAD") || !strings.Contains(one, "TAIL") || !strings.Contains(one, "bytes left out]") || len(one) > 17<<10 {
		t.Errorf("a %d-byte result rendered as %d bytes, head %v, tail %v", len(long), len(one), strings.Contains(one, "HEAD"), strings.Contains(one, "TAIL"))
	}
	if !utf8.ValidString(one) {
		t.Error("the clipped result is not valid UTF-8")
	}

	// A conversation over the limit keeps the task and the latest messages.
	msgs := session(200, 10_000)
	msgs[len(msgs)-1].Content[0].Text = "LATEST"
	out := compaction.Render(msgs, compaction.MaxSummaryInput)
	if len(out) > compaction.MaxSummaryInput {
		t.Errorf("rendered %d bytes, over the limit", len(out))
	}
	for _, s := range []string{"Fix the failing test", "LATEST", "messages left out]"} {
		if !strings.Contains(out, s) {
			t.Errorf("the rendering lacks %q", s)
		}
	}
}

// FuzzRender checks that a rendering is within its limit and valid UTF-8
// whatever the conversation.
func FuzzRender(f *testing.F) {
	f.Add([]byte{0, 1, 2, 2, 200, 7}, "é€", 4096)
	f.Add([]byte{2}, "x", 10)
	f.Fuzz(func(t *testing.T, data []byte, text string, limit int) {
		if limit < 0 || limit > 1<<20 || !utf8.ValidString(text) {
			return
		}
		msgs := conversation(data)
		if len(msgs) > 0 {
			msgs[0].Content = append(msgs[0].Content, provider.Text(strings.Repeat(text, 100)))
		}
		out := compaction.Render(msgs, limit)
		if len(out) > limit {
			t.Fatalf("%d bytes for a limit of %d", len(out), limit)
		}
		if !utf8.ValidString(out) {
			t.Fatal("not valid UTF-8")
		}
	})
}

func TestReplacement(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("0b9a6a0e-5a43-4c3e-9c55-9f3b6f2f8c10")
	got := compaction.Replacement("The tests pass.", 12, []uuid.UUID{id})
	for _, s := range []string{"first 12 messages were compacted", "<summary>\nThe tests pass.\n</summary>", "Child agents still running", id.String()} {
		if !strings.Contains(got, s) {
			t.Errorf("replacement lacks %q:\n%s", s, got)
		}
	}
	if strings.Contains(compaction.Replacement("s", 4, nil), "Child agents") {
		t.Error("a replacement without pending children names some")
	}
}
