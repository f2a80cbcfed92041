package faults

import (
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP proxy the test controls, between aerie and PostgreSQL:
// it can drop every connection, refuse new ones for a while, and stall the
// traffic (accepting connections but forwarding nothing).
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	down    bool          // new connections are closed at once
	stalled chan struct{} // closed while traffic flows; nil never
}

// startProxy listens on a free local port and forwards to target.
func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, stalled: make(chan struct{})}
	close(p.stalled)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Drop()
		p.Flow()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *proxy) serve(c net.Conn) {
	p.gate() // a stalled proxy holds new connections too
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		_ = c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.track(c, up)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(up, c) }()
	go func() { defer wg.Done(); p.pipe(c, up) }()
	wg.Wait()
	p.untrack(c, up)
}

// pipe copies from src to dst, holding each chunk while the proxy is
// stalled, and closes both ends when either fails.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	defer func() { _ = dst.Close(); _ = src.Close() }()
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF included: the peer is done
		}
	}
}

func (p *proxy) gate() {
	p.mu.Lock()
	ch := p.stalled
	p.mu.Unlock()
	<-ch
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// Drop closes every connection through the proxy, as a network failure
// or a server crash would.
func (p *proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Cut drops every connection and closes new ones as soon as they are
// accepted, until Restore: the database is unreachable.
func (p *proxy) Cut() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Drop()
}

// Restore accepts connections again after Cut.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// Stall holds all traffic, new connections included, until Flow.
func (p *proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stalled:
		p.stalled = make(chan struct{})
	default:
	}
}

// Flow lets traffic through again.
func (p *proxy) Flow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stalled:
	default:
		close(p.stalled)
	}
}

// stallFor stalls the proxy for d.
func (p *proxy) stallFor(d time.Duration) {
	p.Stall()
	time.Sleep(d)
	p.Flow()
}
