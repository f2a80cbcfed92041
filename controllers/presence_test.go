package controllers

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestPresence(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	db := keyRef{namespace: "team-a", name: "aerie-database", key: "url"}
	tests := []struct {
		name     string
		remember []time.Time // when db was found
		ask      keyRef
		at       time.Time
		want     bool
	}{
		{"never found", nil, db, t0, false},
		{"found just now", []time.Time{t0}, db, t0, true},
		{"found within the TTL", []time.Time{t0}, db, t0.Add(secretCheckTTL - time.Nanosecond), true},
		{"expired at the TTL", []time.Time{t0}, db, t0.Add(secretCheckTTL), false},
		{"found again later", []time.Time{t0, t0.Add(secretCheckTTL)}, db, t0.Add(secretCheckTTL + time.Second), true},
		{"another key of the Secret", []time.Time{t0}, keyRef{namespace: "team-a", name: "aerie-database", key: "dsn"}, t0, false},
		{"the same name in another namespace", []time.Time{t0}, keyRef{namespace: "team-b", name: "aerie-database", key: "url"}, t0, false},
		{"a clock that went back", []time.Time{t0}, db, t0.Add(-time.Second), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPresence(secretCheckTTL)
			for _, at := range tt.remember {
				p.remember(db, at)
			}
			if got := p.found(tt.ask, tt.at); got != tt.want {
				t.Errorf("found(%v, t0%+v) = %v, want %v", tt.ask, tt.at.Sub(t0), got, tt.want)
			}
		})
	}
}

func TestPresenceNil(t *testing.T) {
	t.Parallel()
	var p *presence
	k := keyRef{namespace: "ns", name: "s", key: "k"}
	p.remember(k, time.Now())
	if p.found(k, time.Now()) {
		t.Error("a nil presence found a key")
	}
}

// TestPresenceSweep checks that expired keys are dropped as new ones come,
// so that the map holds about the keys of the last TTL.
func TestPresenceSweep(t *testing.T) {
	t.Parallel()
	p := newPresence(time.Second)
	t0 := time.Now()
	for i := range 3000 {
		// 100 keys a second: about 100 are live at any time.
		p.remember(keyRef{namespace: "ns", name: fmt.Sprint(i), key: "k"}, t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	if n := len(p.seen); n > 1024+100 {
		t.Errorf("%d keys remembered, want at most the sweep threshold plus one TTL's worth", n)
	}
	if !p.found(keyRef{namespace: "ns", name: "2999", key: "k"}, t0.Add(29990*time.Millisecond)) {
		t.Error("the last key was dropped")
	}
}

// TestPresenceConcurrent runs checks and records at once, for the race
// detector.
func TestPresenceConcurrent(t *testing.T) {
	t.Parallel()
	p := newPresence(time.Minute)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := keyRef{namespace: "ns", name: fmt.Sprint(i % 50), key: fmt.Sprint(g % 2)}
				if !p.found(k, time.Now()) {
					p.remember(k, time.Now())
				}
			}
		})
	}
	wg.Wait()
	if len(p.seen) != 100 {
		t.Errorf("%d keys remembered, want 100", len(p.seen))
	}
}
