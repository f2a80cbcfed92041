package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"
)

// Container logs are kept as the kubelet keeps them: one file per container
// start, each line in the CRI logging format
//
//	<RFC 3339 timestamp with nanoseconds> <stdout|stderr> <P|F> <content>
//
// where F ends a line of the container's output and P is a piece of a line
// that goes on in the next entry (a long line, or output that stopped
// without a newline). Timestamps make `kubectl logs --timestamps` and
// --since work; the tag lets long lines and unterminated output come back
// byte for byte.

// criMaxContent is the longest content of one log entry; longer lines are
// split into P entries, as containerd splits them at 16 KiB.
const criMaxContent = 16 << 10

// criEntry is one line of a CRI log file.
type criEntry struct {
	Time   time.Time
	Stream string // "stdout" or "stderr"
	// Partial is the P tag: the content continues in the next entry.
	Partial bool
	Content []byte
}

// errCRIEntry is wrapped by every parse error of a log line.
var errCRIEntry = errors.New("malformed CRI log entry")

// parseCRIEntry parses one line of a CRI log file, without its newline.
// Content aliases line.
func parseCRIEntry(line []byte) (criEntry, error) {
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return criEntry{}, fmt.Errorf("%w: no stream after the timestamp", errCRIEntry)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return criEntry{}, fmt.Errorf("%w: timestamp: %w", errCRIEntry, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return criEntry{}, fmt.Errorf("%w: no tag after the stream", errCRIEntry)
	}
	e := criEntry{Time: t, Stream: string(stream)}
	if e.Stream != "stdout" && e.Stream != "stderr" {
		return criEntry{}, fmt.Errorf("%w: stream %q is neither stdout nor stderr", errCRIEntry, stream)
	}
	tag, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return criEntry{}, fmt.Errorf("%w: no content after the tag", errCRIEntry)
	}
	switch string(tag) {
	case "P":
		e.Partial = true
	case "F":
	default:
		return criEntry{}, fmt.Errorf("%w: tag %q is neither P nor F", errCRIEntry, tag)
	}
	e.Content = content
	return e, nil
}

// appendCRIEntry appends e to b as a log file line, newline included.
func appendCRIEntry(b []byte, e criEntry) []byte {
	b = e.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, ' ')
	b = append(b, e.Stream...)
	if e.Partial {
		b = append(b, " P "...)
	} else {
		b = append(b, " F "...)
	}
	b = append(b, e.Content...)
	return append(b, '\n')
}

// containerLog is the log file of one start of one container.
type containerLog struct {
	path string
	// done is closed once both output streams have ended and the file is
	// complete: a follower stops there.
	done chan struct{}

	mu sync.Mutex
	f  *os.File
}

// newContainerLog creates the log file at path.
func newContainerLog(path string) (*containerLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("create container log: %w", err)
	}
	return &containerLog{path: path, done: make(chan struct{}), f: f}, nil
}

// copyStream writes what r delivers, as entries of stream, until r ends.
func (l *containerLog) copyStream(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, criMaxContent)
	var buf []byte
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			e := criEntry{Time: time.Now(), Stream: stream, Content: line}
			if line[len(line)-1] == '\n' {
				e.Content = line[:len(line)-1]
			} else {
				// A full buffer or the end of the output: the line goes on,
				// or never ends.
				e.Partial = true
			}
			buf = appendCRIEntry(buf[:0], e)
			l.mu.Lock()
			_, _ = l.f.Write(buf) // a full disk loses log lines, not the container
			l.mu.Unlock()
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// finish closes the file and marks the log complete.
func (l *containerLog) finish() {
	l.mu.Lock()
	_ = l.f.Close()
	l.mu.Unlock()
	close(l.done)
}

// logOptions are the kubelet's containerLogs query parameters.
type logOptions struct {
	// Tail is the number of entries to show from the end; -1 shows all.
	Tail int
	// LimitBytes stops the output after this many bytes; 0 is no limit.
	LimitBytes int64
	Timestamps bool
	Follow     bool
	Previous   bool
	// Since drops entries older than this; zero keeps all.
	Since time.Time
}

// parseLogOptions reads the query of a containerLogs request, as the API
// server sends it for `kubectl logs`.
func parseLogOptions(q url.Values, now time.Time) (logOptions, error) {
	o := logOptions{Tail: -1}
	boolParam := func(name string, dst *bool) error {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("query parameter %s=%q: not a boolean", name, v)
			}
			*dst = b
		}
		return nil
	}
	for name, dst := range map[string]*bool{"timestamps": &o.Timestamps, "follow": &o.Follow, "previous": &o.Previous} {
		if err := boolParam(name, dst); err != nil {
			return o, err
		}
	}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, fmt.Errorf("query parameter tailLines=%q: not a count of lines", v)
		}
		o.Tail = n
	}
	if v := q.Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("query parameter limitBytes=%q: not a positive number of bytes", v)
		}
		o.LimitBytes = n
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, fmt.Errorf("query parameter sinceSeconds=%q: not a positive number of seconds", v)
		}
		o.Since = now.Add(-time.Duration(n) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		if q.Get("sinceSeconds") != "" {
			return o, errors.New("query parameters sinceSeconds and sinceTime exclude each other")
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, fmt.Errorf("query parameter sinceTime=%q: not an RFC 3339 time", v)
		}
		o.Since = t
	}
	return o, nil
}

// followPoll is how often a follower looks for new output.
const followPoll = 50 * time.Millisecond

// streamLog writes the log at path to w as `kubectl logs` shows it: the
// content of each entry, a newline after those that end a line. With
// o.Follow it waits for more until done is closed and everything is
// written, or ctx ends. flush is called whenever the follower catches up.
func streamLog(ctx context.Context, w io.Writer, flush func(), path string, done <-chan struct{}, o logOptions) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open container log: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only
	if o.Tail >= 0 {
		off, err := tailOffset(f, o.Tail)
		if err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return fmt.Errorf("seek container log: %w", err)
		}
	}
	lw := &limitedWriter{w: w, left: o.LimitBytes}
	br := bufio.NewReader(f)
	var pending []byte // a line the writer has not finished yet
	var out []byte
	for {
		chunk, err := br.ReadBytes('\n')
		pending = append(pending, chunk...)
		if err == nil {
			e, perr := parseCRIEntry(pending[:len(pending)-1])
			pending = pending[:0]
			if perr != nil || (!o.Since.IsZero() && e.Time.Before(o.Since)) {
				continue
			}
			out = out[:0]
			if o.Timestamps {
				out = e.Time.UTC().AppendFormat(out, time.RFC3339Nano)
				out = append(out, ' ')
			}
			out = append(out, e.Content...)
			if !e.Partial {
				out = append(out, '\n')
			}
			if _, err := lw.Write(out); err != nil {
				if errors.Is(err, errLimitReached) {
					return nil
				}
				return err
			}
			continue
		}
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("read container log: %w", err)
		}
		if !o.Follow {
			return nil
		}
		flush()
		select {
		case <-done:
			// Complete: one more pass reads what was written before the end.
			rest, err := io.ReadAll(br)
			if err != nil {
				return fmt.Errorf("read container log: %w", err)
			}
			if len(rest) == 0 {
				return nil
			}
			br = bufio.NewReader(bytes.NewReader(rest))
			o.Follow = false
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

// tailOffset returns the offset of the n-th complete entry from the end of
// f.
func tailOffset(f *os.File, n int) (int64, error) {
	var offsets []int64 // start of each complete entry
	br := bufio.NewReader(f)
	var off int64
	for {
		line, err := br.ReadBytes('\n')
		if err == nil {
			offsets = append(offsets, off)
		}
		off += int64(len(line))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read container log: %w", err)
		}
	}
	if n >= len(offsets) {
		return 0, nil
	}
	if n == 0 {
		return off, nil
	}
	return offsets[len(offsets)-n], nil
}

var errLimitReached = errors.New("log byte limit reached")

// limitedWriter writes up to left bytes (no limit when left is 0 at the
// start) and then fails with errLimitReached.
type limitedWriter struct {
	w       io.Writer
	left    int64
	limited bool
}

func (lw *limitedWriter) Write(p []byte) (int, error) {
	if lw.left == 0 && !lw.limited {
		return lw.w.Write(p)
	}
	lw.limited = true
	cut := false
	if int64(len(p)) >= lw.left {
		p, cut = p[:lw.left], true
	}
	n, err := lw.w.Write(p)
	lw.left -= int64(n)
	if err == nil && cut {
		err = errLimitReached
	}
	return n, err
}

// serveLogs answers GET /containerLogs/{namespace}/{pod}/{container}, the
// kubelet endpoint the API server proxies `kubectl logs` to.
func (r *PodRunner) serveLogs(w http.ResponseWriter, req *http.Request) {
	ns, name, container := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	o, err := parseLogOptions(req.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	pw := r.byName[ns+"/"+name]
	r.mu.Unlock()
	if pw == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s is not on node %s", ns, name, r.node), http.StatusNotFound)
		return
	}
	l, err := pw.logFor(container, o.Previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/plain")
	if err := streamLog(req.Context(), w, func() { _ = rc.Flush() }, l.path, l.done, o); err != nil {
		r.log.Warn("serve container log", "pod", ns+"/"+name, "container", container, "error", err)
	}
}

// selfSignedCert makes the serving certificate of the kubelet endpoint. The
// API server does not check it: without --kubelet-certificate-authority it
// connects to kubelets without verifying them, and envtest sets none.
func selfSignedCert(node string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate kubelet key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generate kubelet certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", node},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("sign kubelet certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
