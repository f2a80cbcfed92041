package executor

// # The executor protocol
//
// Remote (the client, in the agent container) and Serve (the server, in
// the workspace container) speak it over one unix stream connection. The
// server holds a Local; every call of the Executor interface is a stream
// of frames on the connection, so that many calls and many commands share
// one connection without waiting for each other.
//
// ## Frames
//
// Every frame is a 10-byte header and a payload:
//
//	offset 0  uint32  payload length, big-endian, at most maxPayload
//	offset 4  uint32  stream id, big-endian
//	offset 8  uint8   type
//	offset 9  uint8   channel (0 unless the type is data, close or window)
//	offset 10 payload
//
// JSON payloads are single JSON values; everything else is raw bytes. A
// frame that breaks a rule below is a protocol error: the receiver closes
// the connection, which the server treats as connection loss.
//
// ## Handshake
//
// The client's first frame is hello on stream 0, {"protocol":1}; the
// server answers hello {"protocol":1,"workspace":"/workspace"}, or hello
// {"error":{...}} and closes the connection when it does not speak the
// client's version.
//
// ## Streams
//
// The client opens a stream with a request frame carrying a new id,
// greater than every id it used before on the connection; the JSON
// request names the operation (op) and its arguments. The server answers
// with exactly one response frame, which carries the result or the error,
// and ends the stream with an end frame, after which it sends nothing
// more on it and forgets it. The client may send cancel at any time
// before end: the context of its call has ended.
//
//	op            request fields          response, then
//	start         command                 info; stdout/stderr data, exit
//	signal        id, signal              -
//	list          -                       infos
//	teardown      id                      report
//	teardown_all  -                       reports
//	read_file     name                    -; the contents on channel out
//	write_file    name, perm; data on in  -
//	stat          name                    file
//	read_dir      name                    -; an item per entry on out
//	walk          name, walk              -; an item per entry on out
//	remove        name                    -
//	close         -                       -, once the groups are gone
//
// Errors travel as {"message","kind","errno","op","path"}: the message as
// the server printed it, the sentinel it wraps (kind: not_found,
// outside_workspace, exited...) and the errno, so that errors.Is works on
// the client as it does on a Local, and the op and path of an
// *fs.PathError.
//
// ## Channels and flow control
//
// A stream has three byte channels: in (client to server: a command's
// standard input, write_file's contents), out (server to client: standard
// output, read_file's contents, read_dir's and walk's items as JSON
// lines) and err (standard error). A data frame carries bytes on one; a
// close frame from the writer ends the channel (end of file), and a close
// frame from the reader says it stopped reading: the writer discards the
// rest (a command's output) or fails its writes (standard input, with
// EPIPE).
//
// Each channel has a window of windowSize bytes: the writer may have at
// most that many bytes sent and not yet acknowledged. The reader
// acknowledges bytes with a window frame (a uint32 increment) as its
// consumer reads them, never as they arrive, so a channel's buffer never
// holds more than its window however fast the writer or slow the reader.
// The frame reader never blocks on a consumer, so one stream never stalls
// another. A command that writes faster than the agent reads is stopped
// by its pipe, as it would be writing to a pipe directly: Local's output
// buffer, the window and the socket's buffers are all bounded.
//
// ## Commands
//
// start's response is the group's ProcessInfo. Then come the command's
// output, as data on out and err, each channel closed at its end; one
// exit frame, {"exit":{...},"error":...}, when the leader exits; and end,
// when the group has finished (its leader has exited and nothing of it is
// alive, or it has been torn down) — until end, a cancel tears the group
// down. The stream's context on the server is the group's context: a
// cancel, like the end of a Local.Start context, tears the whole group
// down, even after its leader has exited.
//
// ## Connection loss
//
// When the connection ends without close (the agent died, or a protocol
// error), the server cancels every stream of the connection, which tears
// down every group started over it, except groups the server's Local has
// detached. close asks the server for the same and waits for it, and
// refuses further commands; the client then closes the connection.
//
// ## Trust
//
// The server enforces the workspace boundary: names travel as the client
// gave them and Local refuses those that lead outside. The client does
// not trust the server either: frames and JSON payloads are bounded, and
// a window overrun is a protocol error, since the socket lives in a
// directory that the workspace's own processes may be able to write.

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/aerie-run/aerie/runner/process"
)

// protocolVersion is the version of the protocol spoken in hello.
const protocolVersion = 1

const (
	// headerSize is the size of a frame header.
	headerSize = 10
	// maxPayload bounds a frame's payload, JSON or data.
	maxPayload = 1 << 20
	// maxData bounds a data frame's payload: smaller than the window, so
	// that a writer gets going again after a fraction of it is read.
	maxData = 64 << 10
	// windowSize is each channel's flow-control window.
	windowSize = 512 << 10
)

// frameType is what a frame carries.
type frameType uint8

const (
	frameHello    frameType = 1 // stream 0, both ways, JSON hello
	frameRequest  frameType = 2 // client to server, JSON request; opens a stream
	frameResponse frameType = 3 // server to client, JSON response
	frameData     frameType = 4 // both ways, bytes on a channel
	frameClose    frameType = 5 // both ways, empty: end of a channel, or stop reading it
	frameWindow   frameType = 6 // both ways, uint32: bytes of a channel acknowledged
	frameCancel   frameType = 7 // client to server, empty: the call's context ended
	frameExit     frameType = 8 // server to client, JSON exitMessage
	frameEnd      frameType = 9 // server to client, empty: the stream is over
)

func (t frameType) String() string {
	names := [...]string{"", "hello", "request", "response", "data", "close", "window", "cancel", "exit", "end"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("frame type %d", uint8(t))
}

// channel is one of a stream's byte channels.
type channel uint8

const (
	chNone channel = 0
	chIn   channel = 1 // client to server
	chOut  channel = 2 // server to client
	chErr  channel = 3 // server to client
)

// frame is one decoded frame. payload is owned by the frame.
type frame struct {
	id      uint32
	typ     frameType
	ch      channel
	payload []byte
}

// errProtocol marks a frame or message that breaks the protocol.
var errProtocol = errors.New("executor protocol error")

func protocolErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, args...))
}

// readFrame reads one frame and checks its structure.
func readFrame(r *bufio.Reader) (frame, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return frame{}, protocolErrorf("truncated frame header")
		}
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(h[0:4])
	f := frame{id: binary.BigEndian.Uint32(h[4:8]), typ: frameType(h[8]), ch: channel(h[9])}
	if n > maxPayload {
		return frame{}, protocolErrorf("%s frame of %d bytes, more than %d", f.typ, n, maxPayload)
	}
	if err := f.checkHeader(int(n)); err != nil {
		return frame{}, err
	}
	if n > 0 {
		f.payload = payloadBuffer(f.typ, int(n))
		if _, err := io.ReadFull(r, f.payload); err != nil {
			return frame{}, protocolErrorf("truncated %s frame: %v", f.typ, err)
		}
	}
	return f, nil
}

// checkHeader checks what a frame's type says of its stream, channel and
// payload length.
func (f frame) checkHeader(n int) error {
	switch f.typ {
	case frameHello:
		if f.id != 0 {
			return protocolErrorf("hello on stream %d", f.id)
		}
	case frameRequest, frameResponse, frameCancel, frameExit, frameEnd, frameData, frameClose, frameWindow:
		if f.id == 0 {
			return protocolErrorf("%s frame on stream 0", f.typ)
		}
	default:
		return protocolErrorf("unknown frame type %d", uint8(f.typ))
	}
	switch f.typ {
	case frameData, frameClose, frameWindow:
		if f.ch < chIn || f.ch > chErr {
			return protocolErrorf("%s frame on unknown channel %d", f.typ, f.ch)
		}
	default:
		if f.ch != chNone {
			return protocolErrorf("%s frame with channel %d", f.typ, f.ch)
		}
	}
	switch f.typ {
	case frameData:
		if n == 0 || n > maxData {
			return protocolErrorf("data frame of %d bytes, want 1 to %d", n, maxData)
		}
	case frameWindow:
		if n != 4 {
			return protocolErrorf("window frame of %d bytes, want 4", n)
		}
	case frameClose, frameCancel, frameEnd:
		if n != 0 {
			return protocolErrorf("%s frame with a payload", f.typ)
		}
	default:
		if n == 0 {
			return protocolErrorf("%s frame without a payload", f.typ)
		}
	}
	return nil
}

// window decodes a window frame's increment.
func (f frame) window() (int, error) {
	n := binary.BigEndian.Uint32(f.payload)
	if n == 0 || n > windowSize {
		return 0, protocolErrorf("window increment %d, want 1 to %d", n, windowSize)
	}
	return int(n), nil
}

// appendHeader appends the header of a frame with n bytes of payload.
func appendHeader(b []byte, id uint32, t frameType, ch channel, n int) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, id)
	return append(b, byte(t), byte(ch))
}

// hello is the handshake, both ways.
type hello struct {
	Protocol  int        `json:"protocol"`
	Workspace string     `json:"workspace,omitempty"`
	Error     *wireError `json:"error,omitempty"`
}

// Operations of a request.
const (
	opStart       = "start"
	opSignal      = "signal"
	opList        = "list"
	opTeardown    = "teardown"
	opTeardownAll = "teardown_all"
	opReadFile    = "read_file"
	opWriteFile   = "write_file"
	opStat        = "stat"
	opReadDir     = "read_dir"
	opWalk        = "walk"
	opRemove      = "remove"
	opClose       = "close"
)

// request is a call's arguments.
type request struct {
	Op      string       `json:"op"`
	Command *Command     `json:"command,omitempty"`
	ID      string       `json:"id,omitempty"`
	Signal  int          `json:"signal,omitempty"`
	Name    string       `json:"name,omitempty"`
	Perm    fs.FileMode  `json:"perm,omitempty"`
	Walk    *WalkOptions `json:"walk,omitempty"`
}

// decodeRequest parses and checks a request frame's payload.
func decodeRequest(b []byte) (request, error) {
	var req request
	if err := json.Unmarshal(b, &req); err != nil {
		return request{}, protocolErrorf("request: %v", err)
	}
	switch req.Op {
	case opStart:
		if req.Command == nil {
			return req, protocolErrorf("start request without a command")
		}
	case opSignal:
		if req.Signal <= 0 || req.Signal > 64 {
			return req, protocolErrorf("signal request with signal %d", req.Signal)
		}
		fallthrough
	case opTeardown:
		if req.ID == "" {
			return req, protocolErrorf("%s request without an id", req.Op)
		}
	case opList, opTeardownAll, opClose, opReadFile, opWriteFile, opStat, opReadDir, opWalk, opRemove:
	default:
		return req, protocolErrorf("unknown operation %q", req.Op)
	}
	return req, nil
}

// response is a call's result.
type response struct {
	Error   *wireError       `json:"error,omitempty"`
	Info    *ProcessInfo     `json:"info,omitempty"`
	Infos   []ProcessInfo    `json:"infos,omitempty"`
	Report  *process.Report  `json:"report,omitempty"`
	Reports []process.Report `json:"reports,omitempty"`
	File    *FileInfo        `json:"file,omitempty"`
}

// exitMessage is an exit frame's payload: Process.Wait's result.
type exitMessage struct {
	Exit  Exit       `json:"exit"`
	Error *wireError `json:"error,omitempty"`
}

// item is one entry of read_dir or walk, a JSON line on channel out.
type item struct {
	File  FileInfo   `json:"file"`
	Error *wireError `json:"error,omitempty"`
}

// decodeJSON parses a JSON frame's payload into v.
func decodeJSON(f frame, v any) error {
	if err := json.Unmarshal(f.payload, v); err != nil {
		return protocolErrorf("%s: %v", f.typ, err)
	}
	return nil
}

// wireError is an error as it crosses the connection.
type wireError struct {
	Message string `json:"message"`
	Kind    string `json:"kind,omitempty"`
	Errno   int    `json:"errno,omitempty"`
	Op      string `json:"op,omitempty"`
	Path    string `json:"path,omitempty"`
}

// sentinels are the errors that keep their identity across the
// connection, by kind. The first that matches an error names it.
var sentinels = []struct {
	kind string
	err  error
}{
	{"not_found", ErrNotFound},
	{"closed", ErrClosed},
	{"outside_workspace", ErrOutsideWorkspace},
	{"exited", process.ErrExited},
	{"identity_mismatch", process.ErrIdentityMismatch},
	{"unverifiable", process.ErrUnverifiable},
	{"canceled", context.Canceled},
	{"deadline_exceeded", context.DeadlineExceeded},
	{"not_exist", fs.ErrNotExist},
	{"exist", fs.ErrExist},
	{"permission", fs.ErrPermission},
	{"invalid", fs.ErrInvalid},
}

// toWire describes err for the connection; nil for nil.
func toWire(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Message: err.Error()}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		w.Op, w.Path, w.Message = pe.Op, pe.Path, pe.Err.Error()
		err = pe.Err
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			w.Kind = s.kind
			break
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		w.Errno = int(errno)
	}
	return w
}

// err rebuilds the error; nil for nil.
func (w *wireError) err() error {
	if w == nil {
		return nil
	}
	re := &remoteError{msg: w.Message}
	for _, s := range sentinels {
		if s.kind == w.Kind {
			re.wrapped = append(re.wrapped, s.err)
			break
		}
	}
	if w.Errno > 0 && w.Errno < 4096 {
		re.wrapped = append(re.wrapped, syscall.Errno(w.Errno))
	}
	if w.Op != "" || w.Path != "" {
		return &fs.PathError{Op: w.Op, Path: w.Path, Err: re}
	}
	return re
}

// remoteError is an error that happened in the server: its text as the
// server printed it, and the sentinel and errno it wrapped there.
type remoteError struct {
	msg     string
	wrapped []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.wrapped }
