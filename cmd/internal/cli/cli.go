// Package cli holds what aerie's command-line programs, aerie and
// kubectl-aerie, share: errors that carry an exit status, and how their
// tables and JSON outputs look.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// ExitError is a failure with an exit status of its own (aerie run's
// statuses, which submit --wait also uses). A nil Err means the command has
// already reported the failure.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Age says how long before now t was, in the largest whole unit, as people
// read it in a table; after a month the date says more.
func Age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	case d < 30*24*time.Hour:
		return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
	default:
		return t.Local().Format(time.DateOnly)
	}
}

// Dash stands in for an empty table cell.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteJSON writes v as indented JSON, the form of every --json output.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
