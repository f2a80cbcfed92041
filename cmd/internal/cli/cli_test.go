package cli

import (
	"testing"
	"time"
)

func TestAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.Local)
	tests := []struct {
		ago  time.Duration
		want string
	}{
		{-time.Minute, "just now"}, // another machine's clock
		{0, "just now"},
		{59 * time.Second, "59s ago"},
		{90 * time.Second, "1m ago"},
		{59 * time.Minute, "59m ago"},
		{47 * time.Hour, "47h ago"},
		{48 * time.Hour, "2d ago"},
		{29 * 24 * time.Hour, "29d ago"},
		{40 * 24 * time.Hour, "2025-04-22"},
	}
	for _, tt := range tests {
		if got := Age(now, now.Add(-tt.ago)); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.ago, got, tt.want)
		}
	}
}

func TestDash(t *testing.T) {
	t.Parallel()
	if got := Dash(""); got != "-" {
		t.Errorf("Dash(\"\") = %q, want -", got)
	}
	if got := Dash("Running"); got != "Running" {
		t.Errorf("Dash(\"Running\") = %q", got)
	}
}
