package extensions

import (
	"fmt"
	"unicode/utf8"
)

// StreamKeep is how much of each end of a custom tool's output stream is
// kept: the spec's 512 KiB head and 512 KiB tail.
const StreamKeep = 512 << 10

// headTail keeps the first and the last n bytes written to it and counts
// the rest, so that a tool printing gigabytes costs 2n bytes of memory.
type headTail struct {
	n     int
	head  []byte
	ring  []byte // the last bytes; once full, oldest at start
	start int
	total int64
}

func newHeadTail(n int) *headTail { return &headTail{n: n} }

func (w *headTail) Write(p []byte) (int, error) {
	written := len(p)
	w.total += int64(len(p))
	if room := w.n - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		if len(w.ring) < w.n {
			k := min(w.n-len(w.ring), len(p))
			w.ring = append(w.ring, p[:k]...)
			p = p[k:]
			continue
		}
		if len(p) >= w.n {
			copy(w.ring, p[len(p)-w.n:])
			w.start = 0
			break
		}
		k := copy(w.ring[w.start:], p)
		w.start = (w.start + k) % w.n
		p = p[k:]
	}
	return written, nil
}

// dropped returns how many bytes were neither in the head nor the tail.
func (w *headTail) dropped() int64 { return w.total - int64(len(w.head)) - int64(len(w.ring)) }

// String returns the head and the tail, with a marker saying how many
// bytes were dropped between them. The cut is moved to UTF-8 boundaries,
// so that the marker never splits a character; the bytes that moves are
// counted as dropped.
func (w *headTail) String() string {
	tail := make([]byte, 0, len(w.ring))
	tail = append(tail, w.ring[w.start:]...)
	tail = append(tail, w.ring[:w.start]...)
	dropped := w.dropped()
	if dropped == 0 {
		return string(w.head) + string(tail)
	}
	head := w.head
	for i := 0; i < utf8.UTFMax-1 && len(head) > 0; i++ {
		if r, size := utf8.DecodeLastRune(head); r != utf8.RuneError || size != 1 {
			break
		}
		head = head[:len(head)-1]
		dropped++
	}
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
		dropped++
	}
	return fmt.Sprintf("%s\n[... %d bytes dropped ...]\n%s", head, dropped, tail)
}
