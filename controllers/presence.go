package controllers

import (
	"sync"
	"time"
)

// secretCheckTTL is how long a Secret key found stays found: the window in
// which a session may start although the key was removed since the check.
// Such a session's pod waits in CreateContainerConfigError, as it would
// have had the key been removed just after a fresh check.
const secretCheckTTL = 10 * time.Second

// keyRef names one key of a Secret.
type keyRef struct{ namespace, name, key string }

// presence remembers, for a while, which Secret keys were found, so that a
// burst of sessions sharing their Secrets (a namespace's database DSN, a
// team's model key) reads each once rather than once per session. It keeps
// no values, and never remembers a key as missing: a session that names a
// missing key fails on a fresh read. A nil *presence remembers nothing.
type presence struct {
	ttl  time.Duration
	mu   sync.Mutex
	seen map[keyRef]time.Time
}

func newPresence(ttl time.Duration) *presence {
	return &presence{ttl: ttl, seen: map[keyRef]time.Time{}}
}

// found reports whether k was found less than the TTL before now.
func (p *presence) found(k keyRef, now time.Time) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.seen[k]
	return ok && !now.Before(at) && now.Sub(at) < p.ttl
}

// remember records that k was found at now. Expired entries are dropped
// once there are many, so that the map holds about the keys of the last
// TTL.
func (p *presence) remember(k keyRef, now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) >= 1024 {
		for old, at := range p.seen {
			if now.Sub(at) >= p.ttl || now.Before(at) {
				delete(p.seen, old)
			}
		}
	}
	p.seen[k] = now
}
