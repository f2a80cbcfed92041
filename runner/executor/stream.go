package executor

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// wire writes frames to a connection. Frames are written whole, under a
// lock, by whichever goroutine has something to say; the goroutine that
// reads frames never writes, so two peers each blocked writing to the
// other while their readers wait cannot happen.
type wire struct {
	conn net.Conn
	// vectored is whether conn writes a header and its payload with one
	// writev. A TLS connection makes a record of each Write: a frame
	// up to maxData goes to it from one buffer, as one record.
	vectored bool
	mu       sync.Mutex
	hdr      []byte // scratch, under mu
	buf      []byte // scratch of an unvectored frame, under mu
	err      error  // the first write error; every later write fails with it
}

func newWire(c net.Conn) *wire {
	w := &wire{conn: c, hdr: make([]byte, 0, headerSize)}
	switch c.(type) {
	case *net.UnixConn, *net.TCPConn:
		w.vectored = true
	}
	return w
}

// send writes one frame.
func (w *wire) send(id uint32, t frameType, ch channel, payload []byte) error {
	if len(payload) > maxPayload {
		return fmt.Errorf("send %s frame: %d bytes, more than %d", t, len(payload), maxPayload)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.hdr = appendHeader(w.hdr[:0], id, t, ch, len(payload))
	var err error
	switch {
	case len(payload) == 0:
		_, err = w.conn.Write(w.hdr)
	case !w.vectored && len(payload) <= maxData:
		w.buf = append(append(w.buf[:0], w.hdr...), payload...)
		_, err = w.conn.Write(w.buf)
	default:
		bufs := net.Buffers{w.hdr, payload} // one writev
		_, err = bufs.WriteTo(w.conn)
	}
	if err != nil {
		w.err = fmt.Errorf("executor connection: %w", err)
		return w.err
	}
	return nil
}

// sendJSON writes a frame whose payload is v in JSON.
func (w *wire) sendJSON(id uint32, t frameType, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", t, err)
	}
	return w.send(id, t, chNone, b)
}

// sendWindow acknowledges n bytes of a channel.
func (w *wire) sendWindow(id uint32, ch channel, n int) error {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	return w.send(id, frameWindow, ch, b[:])
}

// dataBuffers recycles the payloads of data frames, which are read by
// the frame reader and released once their consumer has read them: a
// stream of output then costs no allocation per frame.
var dataBuffers = sync.Pool{New: func() any { return new([maxData]byte) }}

// payloadBuffer returns a buffer for a payload of n bytes: from
// dataBuffers for a data frame, which recycle releases.
func payloadBuffer(t frameType, n int) []byte {
	if t == frameData && n <= maxData {
		return dataBuffers.Get().(*[maxData]byte)[:n]
	}
	return make([]byte, n)
}

// recycle releases a data frame's payload once nothing refers to it.
func recycle(p []byte) {
	if cap(p) == maxData {
		dataBuffers.Put((*[maxData]byte)(p[:maxData]))
	}
}

// chunk is a data frame's payload, partly read.
type chunk struct {
	buf []byte
	off int
}

// inbound is the receiving end of a channel: the frame reader pushes
// data into it without ever waiting, and its consumer reads it,
// acknowledging what it read so that the writer may send more.
type inbound struct {
	mu     sync.Mutex
	cond   sync.Cond
	chunks []chunk
	n      int   // bytes buffered
	eof    bool  // the writer closed the channel
	err    error // the stream or connection failed
	closed bool  // the consumer closed it: what arrives is discarded
	// unacked counts bytes read and not yet acknowledged.
	unacked int
	// high is the most ever buffered, for tests of the bound.
	high int

	ack  func(n int) // sends a window frame
	stop func()      // tells the writer the consumer stopped reading
}

func newInbound(ack func(int), stop func()) *inbound {
	b := &inbound{ack: ack, stop: stop}
	b.cond.L = &b.mu
	return b
}

// push adds data that arrived, and takes ownership of p. It fails only
// when the writer broke the protocol: data after its close, or beyond
// the window.
func (b *inbound) push(p []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.eof:
		return protocolErrorf("data after the end of a channel")
	case b.closed || b.err != nil:
		recycle(p)
		return nil
	case b.n+len(p) > windowSize:
		return protocolErrorf("data beyond the window: %d bytes buffered, %d more", b.n, len(p))
	}
	b.chunks = append(b.chunks, chunk{buf: p})
	b.n += len(p)
	b.high = max(b.high, b.n)
	b.cond.Broadcast()
	return nil
}

// end marks the end of the channel: Read returns io.EOF after the data.
func (b *inbound) end() {
	b.mu.Lock()
	b.eof = true
	b.cond.Broadcast()
	b.mu.Unlock()
}

// fail makes Read return err once the data buffered is read, unless the
// channel has ended already.
func (b *inbound) fail(err error) {
	b.mu.Lock()
	if b.err == nil && !b.eof {
		b.err = err
	}
	b.cond.Broadcast()
	b.mu.Unlock()
}

func (b *inbound) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b.mu.Lock()
	if err := b.wait(); err != nil {
		b.mu.Unlock()
		return 0, err
	}
	n := 0
	for n < len(p) && len(b.chunks) > 0 {
		c := &b.chunks[0]
		k := copy(p[n:], c.buf[c.off:])
		n += k
		if c.off += k; c.off == len(c.buf) {
			recycle(c.buf)
			b.chunks[0] = chunk{}
			b.chunks = b.chunks[1:]
		}
	}
	b.consumed(n)
	return n, nil
}

// WriteTo writes the channel to w until its end, without copying it
// through another buffer: io.Copy from an output is what most readers do.
func (b *inbound) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		b.mu.Lock()
		if err := b.wait(); err != nil {
			b.mu.Unlock()
			if err == io.EOF {
				err = nil
			}
			return total, err
		}
		c := b.chunks[0]
		b.chunks[0] = chunk{}
		b.chunks = b.chunks[1:]
		b.consumed(len(c.buf) - c.off)
		n, err := w.Write(c.buf[c.off:])
		recycle(c.buf)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
}

// wait waits, with mu held, for data or the end; the error is the
// channel's once all its data has been read.
func (b *inbound) wait() error {
	for b.n == 0 && !b.eof && b.err == nil && !b.closed {
		b.cond.Wait()
	}
	switch {
	case b.closed:
		return os.ErrClosed
	case b.n > 0:
		return nil
	case b.err != nil:
		return b.err
	}
	return io.EOF
}

// consumed records, with mu held, that n bytes were taken by the
// consumer, and unlocks mu; it acknowledges them in batches. A writer out
// of credit has a whole window outstanding, so reading what is buffered
// always reaches the batch.
func (b *inbound) consumed(n int) {
	b.n -= n
	b.unacked += n
	var ack int
	if b.unacked >= windowSize/4 {
		ack, b.unacked = b.unacked, 0
	}
	done := b.eof || b.err != nil
	b.mu.Unlock()
	if ack > 0 && !done {
		b.ack(ack)
	}
}

// Close discards the rest of the channel and tells the writer to stop.
func (b *inbound) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for _, c := range b.chunks {
		recycle(c.buf)
	}
	b.chunks, b.n = nil, 0
	done := b.eof || b.err != nil
	b.cond.Broadcast()
	b.mu.Unlock()
	if !done {
		b.stop()
	}
	return nil
}

// outbound is the sending end of a channel: Write sends data frames as
// far as the window allows and waits for acknowledgements beyond it.
type outbound struct {
	mu     sync.Mutex
	cond   sync.Cond
	credit int
	err    error // why writes fail: the reader stopped, the connection broke
	closed bool  // Close was called
	// onStop runs once, when the reader stops reading.
	onStop  func()
	stopped bool

	data func(p []byte) error // sends a data frame
	eof  func() error         // sends a close frame
}

func newOutbound(data func([]byte) error, eof func() error) *outbound {
	o := &outbound{credit: windowSize, data: data, eof: eof}
	o.cond.L = &o.mu
	return o
}

func (o *outbound) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		o.mu.Lock()
		for o.credit == 0 && o.err == nil && !o.closed {
			o.cond.Wait()
		}
		if err := o.writeErr(); err != nil {
			o.mu.Unlock()
			return written, err
		}
		k := min(len(p), o.credit, maxData)
		o.credit -= k
		o.mu.Unlock()
		if err := o.data(p[:k]); err != nil {
			o.fail(err)
			return written, err
		}
		written += k
		p = p[k:]
	}
	return written, nil
}

func (o *outbound) writeErr() error {
	switch {
	case o.err != nil:
		return o.err
	case o.closed:
		return os.ErrClosed
	}
	return nil
}

// grant adds credit the reader acknowledged.
func (o *outbound) grant(n int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.credit+n > windowSize {
		return protocolErrorf("window overrun: %d bytes of credit, %d more", o.credit, n)
	}
	o.credit += n
	o.cond.Broadcast()
	return nil
}

// fail makes writes fail with err from now on.
func (o *outbound) fail(err error) {
	o.mu.Lock()
	if o.err == nil {
		o.err = err
	}
	o.cond.Broadcast()
	o.mu.Unlock()
}

// stop records that the reader stopped reading: writes fail with err and
// onStop runs.
func (o *outbound) stop(err error) {
	o.fail(err)
	o.mu.Lock()
	f := o.onStop
	first := !o.stopped
	o.stopped = true
	o.mu.Unlock()
	if first && f != nil {
		f()
	}
}

// whenStopped sets f to run when the reader stops reading, at once if it
// already has.
func (o *outbound) whenStopped(f func()) {
	o.mu.Lock()
	o.onStop = f
	stopped := o.stopped
	o.mu.Unlock()
	if stopped {
		f()
	}
}

// Close ends the channel: the reader sees the end of file.
func (o *outbound) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
	return o.eof()
}
