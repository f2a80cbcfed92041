package process

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultGrace is how long Teardown waits between SIGTERM and SIGKILL.
const DefaultGrace = 2 * time.Second

// killWait bounds the SIGKILL phase. SIGKILL cannot be caught, but a
// process in uninterruptible sleep (state D, stuck on I/O) dies only when
// the I/O returns; beyond this Teardown reports it as a survivor.
const killWait = 5 * time.Second

// Sent is one signal Teardown sent.
type Sent struct {
	// PID is the process, or with Group the process group, signalled.
	PID int `json:"pid"`
	// Group means the signal went to the whole group (kill(-pgid)).
	Group bool `json:"group,omitempty"`
	// Signal is the signal's name, such as SIGTERM.
	Signal string `json:"signal"`
	// Escaped means the process had left the group (setsid, setpgid).
	Escaped bool `json:"escaped,omitempty"`
}

// Report says what Teardown found and did.
type Report struct {
	ID   string `json:"id"`
	PGID int    `json:"pgid"`
	// Status is Terminated, AlreadyExited, IdentityMismatch,
	// Unverifiable, or Failed when processes survived SIGKILL.
	Status Status `json:"status"`
	// Sent lists each signal once, in the order sent.
	Sent []Sent `json:"sent,omitempty"`
	// Survivors are the PIDs still alive when Teardown gave up.
	Survivors []int `json:"survivors,omitempty"`
	// Reason explains IdentityMismatch, Unverifiable and Failed.
	Reason string `json:"reason,omitempty"`
}

// Teardown ends group g and everything it started: SIGTERM to the group
// and to its escaped descendants, up to grace (DefaultGrace when zero or
// less) for them to exit, then SIGKILL to whatever is left, repeated with
// a fresh look at /proc until nothing of the group lives, since a process
// may fork while it is being swept. A group that has already exited is a
// success (AlreadyExited), though processes that escaped it are still
// swept.
//
// Nothing is signalled when the group's identity cannot be confirmed: the
// report then says IdentityMismatch or Unverifiable and the error wraps
// ErrIdentityMismatch or ErrUnverifiable. Every process signalled
// individually is checked against the start time it had when it was
// found, through a pidfd, so a PID reused meanwhile is left alone.
//
// ctx only shortens the grace period: when it is done Teardown goes
// straight to SIGKILL, and it always completes the SIGKILL phase. Zombies
// are not waited for: reaping them is their parent's job (or a Reaper's).
func Teardown(ctx context.Context, g Group, grace time.Duration) (Report, error) {
	if grace <= 0 {
		grace = DefaultGrace
	}
	td := teardown{t: newTracker(g), rep: Report{ID: g.ID, PGID: g.PGID}, sent: make(map[Sent]bool)}
	sv, err := td.look(true)
	if err != nil {
		return td.rep, fmt.Errorf("teardown group %d: %w", g.PGID, err)
	}
	if sv.status == AlreadyExited {
		td.rep.Status = AlreadyExited
		return td.rep, nil
	}
	td.signal(sv, unix.SIGTERM)
	td.rep.Status = Terminated
	if td.awaitGone(ctx, grace) {
		return td.rep, nil
	}
	deadline := time.Now().Add(killWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		sv, err := td.look(true)
		if err != nil {
			return td.rep, fmt.Errorf("teardown group %d: %w", g.PGID, err)
		}
		if sv.status != Running {
			return td.rep, nil
		}
		if time.Now().After(deadline) {
			td.rep.Status = Failed
			if sv.groupAlive {
				td.rep.Survivors = append(td.rep.Survivors, groupMembers(g.PGID)...)
			}
			for _, st := range sv.escaped {
				td.rep.Survivors = append(td.rep.Survivors, st.pid)
			}
			slices.Sort(td.rep.Survivors)
			td.rep.Survivors = slices.Compact(td.rep.Survivors)
			td.rep.Reason = fmt.Sprintf("%d processes alive %s after SIGKILL", len(td.rep.Survivors), killWait)
			return td.rep, fmt.Errorf("teardown group %d: %s", g.PGID, td.rep.Reason)
		}
		td.signal(sv, unix.SIGKILL)
		time.Sleep(pause)
	}
}

// teardown is the state of one Teardown call.
type teardown struct {
	t    *tracker
	rep  Report
	sent map[Sent]bool
}

// look takes a snapshot and surveys the group. An identity problem ends
// the teardown; it can only come from the first look, since afterwards the
// tracker knows the group's processes by their start times.
func (td *teardown) look(scanMarker bool) (survey, error) {
	snap, err := takeSnapshot()
	if err != nil {
		td.rep.Status, td.rep.Reason = Unverifiable, err.Error()
		return survey{}, fmt.Errorf("%w: %w", ErrUnverifiable, err)
	}
	sv := td.t.survey(snap, scanMarker)
	if sv.err != nil {
		td.rep.Status, td.rep.Reason = sv.status, sv.err.Error()
		return sv, sv.err
	}
	return sv, nil
}

// signal sends sig to the group, when it has living members, and to each
// escaped process.
func (td *teardown) signal(sv survey, sig unix.Signal) {
	name := unix.SignalName(sig)
	if sv.groupAlive {
		// Verified in this same pass: a living member holds the PGID, so
		// the number cannot have been handed to another group.
		if err := signalGroup(td.t.g.PGID, sig); err == nil {
			td.record(Sent{PID: td.t.g.PGID, Group: true, Signal: name})
		}
	}
	for _, st := range sv.escaped {
		if ok, _ := signalProcess(st.pid, st.start, sig); ok {
			td.record(Sent{PID: st.pid, Signal: name, Escaped: true})
		}
	}
}

func (td *teardown) record(s Sent) {
	if !td.sent[s] {
		td.sent[s] = true
		td.rep.Sent = append(td.rep.Sent, s)
	}
}

// awaitGone polls until nothing of the group is alive, grace has passed or
// ctx is done; it reports whether the group is gone. Polls start fast,
// because most commands exit at once on SIGTERM, and back off. They skip
// the marker scan: new processes can only be children of known ones.
func (td *teardown) awaitGone(ctx context.Context, grace time.Duration) bool {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		case <-time.After(pause):
		}
		sv, err := td.look(false)
		if err != nil {
			return false
		}
		if sv.status != Running {
			return true
		}
	}
}

// groupMembers lists the living processes in pgid, for a report.
func groupMembers(pgid int) []int {
	snap, err := takeSnapshot()
	if err != nil {
		return nil
	}
	var pids []int
	for _, st := range snap.procs {
		if st.pgid == pgid && !st.dead() {
			pids = append(pids, st.pid)
		}
	}
	return pids
}

// signalGroup sends sig to every process in pgid. A group with no process
// left (ESRCH) is not an error: it is what the caller wanted.
func signalGroup(pgid int, sig unix.Signal) error {
	if err := unix.Kill(-pgid, sig); err != nil && err != unix.ESRCH {
		return err
	}
	return nil
}

// signalProcess sends sig to pid if pid is still the process that started
// at start, and reports whether it did. The pidfd is opened first and the
// start time checked after: if the check passes, the pidfd refers to that
// process, and signalling through it cannot reach a successor that got
// the PID in between.
func signalProcess(pid int, start uint64, sig unix.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch err {
	case nil:
	case unix.ESRCH:
		return false, nil
	case unix.ENOSYS, unix.EPERM:
		// No pidfd (Linux before 5.3, or a seccomp filter that predates
		// it): check, then kill. The window for reuse is the time between
		// two system calls, with the PID space to cycle through within it.
		if st, err := readStat(pid); err != nil || st.start != start || st.dead() {
			return false, nil
		}
		if err := unix.Kill(pid, sig); err != nil {
			if err == unix.ESRCH {
				return false, nil
			}
			return false, fmt.Errorf("signal %d: %w", pid, err)
		}
		return true, nil
	default:
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if st, err := readStat(pid); err != nil || st.start != start || st.dead() {
		return false, nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if err == unix.ESRCH {
			return false, nil
		}
		return false, fmt.Errorf("signal %d: %w", pid, err)
	}
	return true, nil
}
