package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestWriterKeepsFirstError writes to a pipe whose reader has gone, as
// `aerie session list | head` leaves it: the first write's EPIPE is kept,
// and later writes neither reach the pipe nor replace it.
func TestWriterKeepsFirstError(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pw.Close(); err != nil {
			t.Error(err)
		}
	})
	w := NewWriter(pw)
	if _, err := fmt.Fprintln(w, "first"); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("first write: %v, want EPIPE", err)
	}
	if n, err := fmt.Fprintln(w, "second"); n != 0 || !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("second write: %d, %v, want 0 and the first error", n, err)
	}
	if !errors.Is(w.Err(), syscall.EPIPE) {
		t.Fatalf("Err() = %v, want EPIPE", w.Err())
	}
}

func TestWriterPassesThrough(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	w := NewWriter(&b)
	fmt.Fprintf(w, "%s, ", "one")
	fmt.Fprintln(w, "two")
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	if b.String() != "one, two\n" {
		t.Fatalf("wrote %q, want %q", b.String(), "one, two\n")
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	tw := NewTable(&b)
	fmt.Fprintln(tw, "ID\tSTATE")
	fmt.Fprintf(tw, "%s\t%s\n", "3f2a0c1e", "active")
	if b.Len() != 0 {
		t.Fatalf("the table reached its writer before Flush: %q", b.String())
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "ID        STATE\n3f2a0c1e  active\n"
	if b.String() != want {
		t.Fatalf("wrote %q, want %q", b.String(), want)
	}
}

// TestTableFlushKeepsFirstError flushes a table to a pipe whose reader has
// gone: Flush reports the write that failed, and so does Err.
func TestTableFlushKeepsFirstError(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pw.Close(); err != nil {
			t.Error(err)
		}
	})
	tw := NewTable(pw)
	fmt.Fprintln(tw, "ID\tSTATE")
	if err := tw.Flush(); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Flush: %v, want EPIPE", err)
	}
	if !errors.Is(tw.Err(), syscall.EPIPE) {
		t.Fatalf("Err() = %v, want EPIPE", tw.Err())
	}
}
