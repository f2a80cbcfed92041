package cli

import (
	"io"
	"text/tabwriter"
)

// Writer is the destination of a command's output: it writes to an
// io.Writer and keeps the first error, after which it writes nothing more.
// A command that prints many lines does so with fmt.Fprintf to a Writer
// and checks Err once, at the end, instead of after every line; a write
// that fails (a full disk, a pipe its reader closed) then ends the command
// with that error instead of going unnoticed. The lint configuration leaves
// fmt.Fprint, Fprintf and Fprintln unchecked only when a Writer is their
// destination.
type Writer struct {
	w   io.Writer
	err error
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// NewTable returns a Writer that lays out the lines written to it as a
// table, the way every table of the commands looks: cells end with a tab,
// rows with a newline, and columns are aligned two spaces apart. The table
// reaches w only as far as Flush has written it.
func NewTable(w io.Writer) *Writer {
	return NewWriter(tabwriter.NewWriter(w, 0, 4, 2, ' ', 0))
}

// Write writes p to the underlying writer, unless an earlier write failed:
// then it returns that error and writes nothing.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	w.err = err
	return n, err
}

// Flush writes out what the underlying writer holds back (a table holds
// its rows until then, to know its columns' widths), unless an earlier
// write failed, and returns Err. For a Writer that holds nothing back it
// only returns Err.
func (w *Writer) Flush() error {
	if f, ok := w.w.(interface{ Flush() error }); ok && w.err == nil {
		w.err = f.Flush()
	}
	return w.err
}

// Err is the first error a write returned, or nil.
func (w *Writer) Err() error { return w.err }
