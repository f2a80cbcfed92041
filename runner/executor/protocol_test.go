package executor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aerie-run/aerie/runner/process"
)

// TestWireErrors: an error keeps its text and its identity across the
// connection.
func TestWireErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		is   []error
	}{
		{"outside", &fs.PathError{Op: "read", Path: "../x", Err: ErrOutsideWorkspace}, []error{ErrOutsideWorkspace}},
		{"errno", &fs.PathError{Op: "remove", Path: "sub", Err: syscall.ENOTEMPTY}, []error{syscall.ENOTEMPTY}},
		{"not exist", &fs.PathError{Op: "stat", Path: "nope", Err: syscall.ENOENT}, []error{fs.ErrNotExist, syscall.ENOENT}},
		{"wrapped sentinel", fmt.Errorf("process %s: %w", "abc", ErrNotFound), []error{ErrNotFound}},
		{"process", fmt.Errorf("signal group 12: %w", process.ErrExited), []error{process.ErrExited}},
		{"context", context.DeadlineExceeded, []error{context.DeadlineExceeded}},
		{"closed", ErrClosed, []error{ErrClosed}},
		{"plain", errors.New("command has neither argv nor a script"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(toWire(tt.err))
			if err != nil {
				t.Fatal(err)
			}
			var w *wireError
			if err := json.Unmarshal(b, &w); err != nil {
				t.Fatal(err)
			}
			got := w.err()
			if got.Error() != tt.err.Error() {
				t.Errorf("text %q, want %q", got, tt.err)
			}
			for _, target := range tt.is {
				if !errors.Is(got, target) {
					t.Errorf("%v is not %v", got, target)
				}
			}
			var pe, wantPE *fs.PathError
			if errors.As(tt.err, &wantPE) && (!errors.As(got, &pe) || pe.Op != wantPE.Op || pe.Path != wantPE.Path) {
				t.Errorf("%#v, want a path error like %#v", got, tt.err)
			}
		})
	}
	if toWire(nil) != nil || (*wireError)(nil).err() != nil {
		t.Error("nil does not stay nil")
	}
}

// encodeFrame returns f as it goes on the wire.
func encodeFrame(f frame) []byte {
	return append(appendHeader(nil, f.id, f.typ, f.ch, len(f.payload)), f.payload...)
}

func TestReadFrameRejects(t *testing.T) {
	t.Parallel()
	header := func(n uint32, id uint32, typ frameType, ch channel) []byte {
		b := binary.BigEndian.AppendUint32(nil, n)
		b = binary.BigEndian.AppendUint32(b, id)
		return append(b, byte(typ), byte(ch))
	}
	tests := []struct {
		name  string
		input []byte
		want  string
	}{
		{"too large", header(maxPayload+1, 1, frameRequest, chNone), "more than"},
		{"unknown type", header(0, 1, 42, chNone), "unknown frame type 42"},
		{"hello on a stream", header(2, 3, frameHello, chNone), "hello on stream 3"},
		{"request on stream 0", header(2, 0, frameRequest, chNone), "request frame on stream 0"},
		{"data without channel", header(1, 1, frameData, chNone), "unknown channel 0"},
		{"data on channel 9", header(1, 1, frameData, 9), "unknown channel 9"},
		{"empty data", header(0, 1, frameData, chIn), "data frame of 0 bytes"},
		{"huge data", header(maxData+1, 1, frameData, chIn), "data frame of 65537 bytes"},
		{"short window", header(3, 1, frameWindow, chOut), "window frame of 3 bytes"},
		{"cancel with payload", header(1, 1, frameCancel, chNone), "cancel frame with a payload"},
		{"response with channel", header(2, 1, frameResponse, chOut), "response frame with channel 2"},
		{"empty response", header(0, 1, frameResponse, chNone), "response frame without a payload"},
		{"truncated header", []byte{0, 0, 0}, "truncated frame header"},
		{"truncated payload", append(header(10, 1, frameRequest, chNone), "{}"...), "truncated request frame"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := readFrame(bufio.NewReader(bytes.NewReader(tt.input)))
			if !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("readFrame = %v, want a protocol error with %q", err, tt.want)
			}
		})
	}
	if _, err := readFrame(bufio.NewReader(bytes.NewReader(nil))); err != io.EOF {
		t.Errorf("readFrame at the end = %v, want io.EOF", err)
	}
	zero := frame{id: 1, typ: frameWindow, ch: chOut, payload: make([]byte, 4)}
	if _, err := zero.window(); !errors.Is(err, errProtocol) {
		t.Errorf("a zero window increment: %v", err)
	}
}

func TestDecodeRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string // want: "" for valid
	}{
		{`{"op":"start","command":{"argv":["true"]}}`, ""},
		{`{"op":"walk","name":"sub","walk":{"skip_dirs":[".git"]}}`, ""},
		{`{"op":"signal","id":"abc","signal":2}`, ""},
		{`{"op":"start"}`, "start request without a command"},
		{`{"op":"signal","id":"abc","signal":0}`, "signal request with signal 0"},
		{`{"op":"signal","signal":15}`, "signal request without an id"},
		{`{"op":"teardown"}`, "teardown request without an id"},
		{`{"op":"format_disk"}`, `unknown operation "format_disk"`},
		{`[1,2]`, "request: json"},
	}
	for _, tt := range tests {
		_, err := decodeRequest([]byte(tt.in))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("decodeRequest(%s) = %v", tt.in, err)
		case tt.want != "" && (!errors.Is(err, errProtocol) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("decodeRequest(%s) = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// FuzzReadFrame feeds the frame decoder arbitrary bytes: it must never
// panic nor accept a frame that breaks the rules, and every frame it
// accepts must encode back to the bytes it came from. The JSON payloads
// go through their decoders too.
func FuzzReadFrame(f *testing.F) {
	cmd := Command{Argv: []string{"echo", "hi"}, Stdin: true}
	req, _ := json.Marshal(request{Op: opStart, Command: &cmd})
	resp, _ := json.Marshal(response{Info: &ProcessInfo{Argv: cmd.Argv}, Error: toWire(ErrNotFound)})
	exit, _ := json.Marshal(exitMessage{Exit: Exit{Code: -1, Signal: "SIGKILL"}})
	window := binary.BigEndian.AppendUint32(nil, 4096)
	for _, fr := range [][]frame{
		{{id: 0, typ: frameHello, payload: []byte(`{"protocol":1}`)}},
		{{id: 1, typ: frameRequest, payload: req}, {id: 1, typ: frameData, ch: chIn, payload: []byte("input")}, {id: 1, typ: frameClose, ch: chIn}},
		{{id: 1, typ: frameResponse, payload: resp}, {id: 1, typ: frameData, ch: chOut, payload: []byte("out")}, {id: 1, typ: frameWindow, ch: chIn, payload: window}},
		{{id: 1, typ: frameExit, payload: exit}, {id: 1, typ: frameEnd}, {id: 2, typ: frameCancel}},
	} {
		var b []byte
		for _, x := range fr {
			b = append(b, encodeFrame(x)...)
		}
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 1, 4, 2, 'x'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			fr, err := readFrame(r)
			if err != nil {
				if err != io.EOF && !errors.Is(err, errProtocol) {
					t.Fatalf("readFrame: unexpected error %v", err)
				}
				return
			}
			if len(fr.payload) > maxPayload {
				t.Fatalf("accepted a payload of %d bytes", len(fr.payload))
			}
			again, err := readFrame(bufio.NewReader(bytes.NewReader(encodeFrame(fr))))
			if err != nil {
				t.Fatalf("re-reading an accepted frame: %v", err)
			}
			if diff := cmp.Diff(fr, again, cmp.AllowUnexported(frame{})); diff != "" {
				t.Fatalf("round trip (-read +re-read):\n%s", diff)
			}
			switch fr.typ {
			case frameRequest:
				if req, err := decodeRequest(fr.payload); err == nil && req.Op == opStart && req.Command == nil {
					t.Fatal("a start request without a command was accepted")
				}
			case frameResponse:
				var resp response
				if decodeJSON(fr, &resp) == nil && resp.Error != nil {
					_ = resp.Error.err().Error()
				}
			case frameExit:
				var m exitMessage
				if decodeJSON(fr, &m) == nil && m.Error != nil {
					_ = m.Error.err().Error()
				}
			case frameHello:
				var h hello
				_ = decodeJSON(fr, &h)
			case frameWindow:
				if n, err := fr.window(); err == nil && (n <= 0 || n > windowSize) {
					t.Fatalf("accepted a window increment of %d", n)
				}
			}
		}
	})
}
