package runconfig

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestReportRoundTrip(t *testing.T) {
	t.Parallel()
	want := Report{
		Outcome: OutcomeBudgetExceeded, ExitCode: 4, SessionID: testID,
		Reason: "the turn budget of 3 is spent", Summary: "Fixed two of three tests.",
		Usage: Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 50, Requests: 3, ToolCalls: 5},
	}
	b, err := EncodeReport(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeReport(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestEncodeReportTruncates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		summary, reason string
	}{
		{"ascii summary", strings.Repeat("a", 10000), "short"},
		{"multibyte summary", strings.Repeat("é日本", 3000), ""},
		{"escaped summary", strings.Repeat("<\"\n", 4000), ""},
		{"long reason too", strings.Repeat("s", 5000), strings.Repeat("r", 5000)},
		{"reason only", "", strings.Repeat("\x01", 3000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := Report{Outcome: OutcomeCompleted, SessionID: testID, Summary: tt.summary, Reason: tt.reason}
			b, err := EncodeReport(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MaxReportBytes {
				t.Fatalf("encoded report is %d bytes, over %d", len(b), MaxReportBytes)
			}
			got, err := DecodeReport(b)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(got.Summary) || !utf8.ValidString(got.Reason) {
				t.Errorf("truncation split a rune")
			}
			if tt.summary != "" && (!strings.HasSuffix(got.Summary, "…") || !strings.HasPrefix(tt.summary, strings.TrimSuffix(got.Summary, "…"))) {
				t.Errorf("summary %q is not a marked prefix of the original", got.Summary[:min(len(got.Summary), 40)])
			}
			if len(b) < MaxReportBytes-64 && got.Summary != tt.summary {
				t.Errorf("summary cut to %d bytes although the report had room (%d bytes)", len(got.Summary), len(b))
			}
		})
	}
}

func TestDecodeReportErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "Error: panic: runtime error", `{"exitCode": 1}`, `{"outcome": 3}`} {
		if _, err := DecodeReport([]byte(in)); err == nil {
			t.Errorf("DecodeReport(%q) succeeded", in)
		}
	}
}

func FuzzEncodeReport(f *testing.F) {
	f.Add("summary", "reason", int64(10))
	f.Add(strings.Repeat("日", 2000), strings.Repeat("\"", 2000), int64(-1))
	f.Add("\xff\xfe", "", int64(0))
	f.Fuzz(func(t *testing.T, summary, reason string, tokens int64) {
		r := Report{Outcome: OutcomeFailed, ExitCode: 1, SessionID: testID, Summary: summary, Reason: reason, Usage: Usage{InputTokens: tokens}}
		b, err := EncodeReport(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > MaxReportBytes {
			t.Fatalf("%d bytes", len(b))
		}
		got, err := DecodeReport(b)
		if err != nil {
			t.Fatal(err)
		}
		if got.Usage != r.Usage || got.Outcome != r.Outcome {
			t.Fatalf("decoded %+v from %+v", got, r)
		}
	})
}

func FuzzDecodeReport(f *testing.F) {
	b, _ := EncodeReport(Report{Outcome: OutcomeCompleted, Summary: "done"})
	f.Add(b)
	f.Add([]byte("{"))
	f.Add([]byte(`{"outcome":"x","usage":{"inputTokens":"1"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeReport(data)
		if err != nil {
			return
		}
		if r.Outcome == "" {
			t.Fatal("decoded a report without outcome")
		}
	})
}

// TestEncodeReportResult keeps a structured result whole when it fits,
// cutting the summary first, and otherwise only its reference.
func TestEncodeReportResult(t *testing.T) {
	t.Parallel()
	small := []byte(`{"ok":true,"files":["a.go","b.go"]}`)
	large := []byte(`{"log":"` + strings.Repeat("x", 5000) + `"}`)
	tests := []struct {
		name        string
		value       []byte
		summary     string
		wantValue   bool
		wantSummary bool
	}{
		{"small result and summary", small, "done", true, true},
		{"small result, long summary", small, strings.Repeat("s", 6000), true, true},
		{"result over the message", large, "done", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := Report{Outcome: OutcomeCompleted, SessionID: testID, Summary: tt.summary, Result: &Result{Value: tt.value, Seq: 17}}
			b, err := EncodeReport(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > MaxReportBytes {
				t.Fatalf("encoded report is %d bytes, over %d", len(b), MaxReportBytes)
			}
			got, err := DecodeReport(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.Result == nil || got.Result.Seq != 17 {
				t.Fatalf("result reference = %+v, want seq 17", got.Result)
			}
			if tt.wantValue != (string(got.Result.Value) == string(tt.value)) {
				t.Errorf("value kept = %v, want %v (got %d bytes)", !tt.wantValue, tt.wantValue, len(got.Result.Value))
			}
			if !tt.wantValue && len(got.Result.Value) != 0 {
				t.Errorf("a value that does not fit is dropped whole, got %d bytes", len(got.Result.Value))
			}
			if tt.wantSummary != (got.Summary != "") {
				t.Errorf("summary %q, want kept = %v", got.Summary, tt.wantSummary)
			}
		})
	}
}
