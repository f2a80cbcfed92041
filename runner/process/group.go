package process

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// MarkerEnv is the environment variable that Start sets in every command
// to the group's ID. Descendants inherit it, which is how Teardown finds
// those that left the group and lost their parent, and how a group whose
// leader is gone is recognised by its remaining members.
const MarkerEnv = "AERIE_PROCESS_GROUP"

// Status is what aerie knows about a group, or what became of it. The
// values are stable: they are printed by `aerie process ... --json`.
type Status string

const (
	// Running: the group, or a process that escaped it, is alive.
	Running Status = "running"
	// Terminated: Teardown signalled the group and everything of it is gone.
	Terminated Status = "terminated"
	// AlreadyExited: nothing of the group was alive; nothing was signalled.
	AlreadyExited Status = "already_exited"
	// IdentityMismatch: the PID or group now belongs to another process
	// (its start time or marker differs). Nothing was signalled.
	IdentityMismatch Status = "identity_mismatch"
	// Unverifiable: aerie could not read enough of /proc to tell whose the
	// group is (permissions, or no /proc). Nothing was signalled.
	Unverifiable Status = "unverifiable"
	// Corrupt: a durable record could not be parsed or is incomplete.
	Corrupt Status = "corrupt"
	// Failed: signals were sent but processes survived SIGKILL, or a
	// record could not be removed.
	Failed Status = "failed"
	// NotFound: no record has that identifier.
	NotFound Status = "not_found"
)

// Resolved reports whether s is a final, successful outcome: the group is
// known to be gone.
func (s Status) Resolved() bool { return s == Terminated || s == AlreadyExited }

var (
	// ErrIdentityMismatch means the PID or group belongs to another process.
	ErrIdentityMismatch = errors.New("identity mismatch")
	// ErrUnverifiable means the group's identity could not be checked.
	ErrUnverifiable = errors.New("identity unverifiable")
	// ErrExited means nothing of the group is alive.
	ErrExited = errors.New("process group has exited")
)

// Group identifies a process group started by Start, in a form that can
// be stored and checked later by another process.
type Group struct {
	// ID is the group's durable identifier, also the value of MarkerEnv in
	// its processes' environments.
	ID string `json:"id"`
	// PID is the leader's process id.
	PID int `json:"pid"`
	// PGID is the process group id; equal to PID for groups from Start.
	PGID int `json:"pgid"`
	// Birth is the leader's fingerprint.
	Birth Fingerprint `json:"birth"`
}

// NewID returns a fresh group identifier: 16 hex digits from crypto/rand,
// unique enough that no unrelated process carries it as a marker.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return hex.EncodeToString(b[:])
}

// ValidID reports whether id can be a group identifier: 1 to 64 ASCII
// letters, digits, '-' or '_'. Identifiers name record files, so nothing
// else (no '/', no '.') is accepted.
func ValidID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Start starts cmd as the leader of a new process group tagged with id and
// returns the group's identity. It sets cmd.SysProcAttr.Setpgid and adds
// MarkerEnv to cmd.Env (a nil Env is taken as os.Environ(), as exec does).
//
// The caller must eventually call cmd.Wait. Until then the leader, even
// once exited, stays a zombie that keeps its PID and the group id
// allocated, so a group whose leader has not been reaped can be signalled
// without any risk of reuse.
func Start(cmd *exec.Cmd, id string) (Group, error) {
	if !ValidID(id) {
		return Group{}, fmt.Errorf("start process group: invalid id %q", id)
	}
	attr := syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.Setpgid, attr.Pgid = true, 0
	cmd.SysProcAttr = &attr
	cmd.Env = withMarker(cmd.Env, id)
	if err := cmd.Start(); err != nil {
		return Group{}, err
	}
	pid := cmd.Process.Pid
	st, err := readStat(pid)
	if err != nil {
		// The child is not reaped yet, so its stat is there unless /proc is
		// missing. A group without a fingerprint could never be verified,
		// hence never torn down: stop it now rather than leak it.
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = cmd.Wait()
		return Group{}, fmt.Errorf("fingerprint group %d: %w", pid, err)
	}
	birth := Fingerprint{StartTime: st.start, BootID: bootID(), PIDNamespace: pidNamespace()}
	return Group{ID: id, PID: pid, PGID: pid, Birth: birth}, nil
}

// withMarker returns env with MarkerEnv=id in place of any inherited one.
// The marker goes first, where a reader of /proc/<pid>/environ finds it
// soonest.
func withMarker(env []string, id string) []string {
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 1, len(env)+1)
	out[0] = MarkerEnv + "=" + id
	for _, kv := range env {
		if !strings.HasPrefix(kv, MarkerEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Inspect reports whether anything of g is alive (Running) or not
// (AlreadyExited). When g's identity cannot be confirmed it returns
// IdentityMismatch or Unverifiable with an error that says why.
func Inspect(g Group) (Status, error) {
	snap, err := takeSnapshot()
	if err != nil {
		return Unverifiable, fmt.Errorf("inspect group %d: %w: %w", g.PGID, ErrUnverifiable, err)
	}
	sv := newTracker(g).survey(snap, true)
	if sv.err != nil {
		return sv.status, fmt.Errorf("inspect group %d: %w", g.PGID, sv.err)
	}
	return sv.status, nil
}

// SignalGroup sends sig to g's process group after verifying its
// identity. It returns ErrExited when no process of the group is alive.
// Processes that escaped the group are not signalled: this is for
// SIGINT, SIGSTOP and the like; to end a group use Teardown.
func SignalGroup(g Group, sig syscall.Signal) error {
	snap, err := takeSnapshot()
	if err != nil {
		return fmt.Errorf("signal group %d: %w: %w", g.PGID, ErrUnverifiable, err)
	}
	sv := newTracker(g).survey(snap, false)
	switch {
	case sv.err != nil:
		return fmt.Errorf("signal group %d: %w", g.PGID, sv.err)
	case !sv.groupAlive:
		return fmt.Errorf("signal group %d: %w", g.PGID, ErrExited)
	}
	if err := signalGroup(g.PGID, sig); err != nil {
		return fmt.Errorf("signal group %d: %w", g.PGID, err)
	}
	return nil
}

// tracker follows one group across the snapshots of a teardown. Every
// process it has once attributed to the group, with its start time, stays
// attributed for as long as it lives, even after it leaves the group or
// loses its parent.
type tracker struct {
	g     Group
	known map[int]uint64
}

func newTracker(g Group) *tracker { return &tracker{g: g, known: make(map[int]uint64)} }

// survey is what one snapshot says about the tracked group.
type survey struct {
	status Status // Running, AlreadyExited, IdentityMismatch or Unverifiable
	err    error  // why, for IdentityMismatch and Unverifiable
	// groupAlive means a living process has the group's PGID and the group
	// is verified: kill(-pgid) reaches only processes of this group.
	groupAlive bool
	// escaped are the living processes of the group outside its PGID.
	escaped []stat
}

// survey verifies the group's identity in s and collects its living
// processes. With scanMarker it also reads the environment of every
// process younger than the leader to find escapees by their marker.
func (t *tracker) survey(s *snapshot, scanMarker bool) survey {
	if sv, ok := t.elsewhere(s); ok {
		return sv
	}
	g := t.g
	var members []stat
	for _, st := range s.procs {
		if st.pgid == g.PGID && !st.dead() && !s.excluded[st.pid] {
			members = append(members, st)
		}
	}
	verified, err := t.verify(s, members)
	if err != nil {
		status := IdentityMismatch
		if errors.Is(err, ErrUnverifiable) {
			status = Unverifiable
		}
		return survey{status: status, err: err}
	}
	return t.collect(s, t.roots(s, verified, members, scanMarker), verified)
}

// elsewhere reports the survey of a group that s cannot see because it was
// started under another boot or in another PID namespace, and ok true then.
func (t *tracker) elsewhere(s *snapshot) (_ survey, ok bool) {
	g := t.g
	if g.Birth.BootID != "" && s.boot != "" && g.Birth.BootID != s.boot {
		// Nothing survives a reboot; and start times of this boot say
		// nothing about processes of the last one.
		return survey{status: AlreadyExited}, true
	}
	if g.Birth.PIDNamespace != "" && s.pidNS != "" && g.Birth.PIDNamespace != s.pidNS {
		return survey{status: Unverifiable, err: fmt.Errorf("%w: group %d was started in PID namespace %s, this is %s",
			ErrUnverifiable, g.PGID, g.Birth.PIDNamespace, s.pidNS)}, true
	}
	return survey{}, false
}

// roots are the processes known to be the group's: the leader and the
// members of a verified group, the processes the tracker saw before, and
// with scanMarker those that carry the group's marker. Their descendants
// are the group's too.
func (t *tracker) roots(s *snapshot, verified bool, members []stat, scanMarker bool) []int {
	g := t.g
	var roots []int
	add := func(pid int) { roots = append(roots, pid) }
	if verified {
		if st, ok := s.procs[g.PID]; ok && !st.dead() {
			add(g.PID)
		}
		for _, m := range members {
			add(m.pid)
		}
	}
	for pid, start := range t.known {
		if st, ok := s.procs[pid]; ok && st.start == start && !st.dead() {
			add(pid)
		}
	}
	if scanMarker {
		for _, st := range s.procs {
			if t.markerCandidate(s, st) {
				if v, found, err := readMarker(st.pid); err == nil && found && v == g.ID {
					add(st.pid)
				}
			}
		}
	}
	return roots
}

// collect walks the process tree down from roots and sorts the living
// processes it finds into the group and its escapees, remembering each as
// known.
func (t *tracker) collect(s *snapshot, roots []int, verified bool) survey {
	sv := survey{status: AlreadyExited}
	seen := make(map[int]bool)
	for len(roots) > 0 {
		pid := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		st, ok := s.procs[pid]
		if seen[pid] || !ok || s.excluded[pid] {
			continue
		}
		seen[pid] = true
		roots = append(roots, s.children[pid]...)
		if st.dead() {
			continue // a zombie's children are already reparented
		}
		t.known[pid] = st.start
		sv.status = Running
		if verified && st.pgid == t.g.PGID {
			sv.groupAlive = true
		} else {
			sv.escaped = append(sv.escaped, st)
		}
	}
	return sv
}

// verify decides whether the group's PGID still names the group. It
// returns false, nil when the group has no living members (there is
// nothing to signal with kill(-pgid), whatever the PGID names now).
func (t *tracker) verify(s *snapshot, members []stat) (bool, error) {
	g := t.g
	if leader, ok := s.procs[g.PID]; ok && g.PID > 0 {
		if leader.start != g.Birth.StartTime {
			return false, fmt.Errorf("%w: pid %d started at tick %d, the group's leader at tick %d",
				ErrIdentityMismatch, g.PID, leader.start, g.Birth.StartTime)
		}
		if !leader.dead() {
			if v, found, err := readMarker(g.PID); err == nil && found && v != g.ID {
				return false, fmt.Errorf("%w: pid %d belongs to group %q, not %q", ErrIdentityMismatch, g.PID, v, g.ID)
			}
		}
		// The leader, alive or an unreaped zombie, holds the PGID while it
		// is the group's leader or a member: the members are the group's.
		if g.PID == g.PGID || leader.pgid == g.PGID {
			return true, nil
		}
	}
	if len(members) == 0 {
		return false, nil
	}
	// The leader is gone, so the PGID is held only by the members: they
	// must show they are the group's, by start time already known to this
	// tracker or by the marker.
	unreadable := 0
	for _, m := range members {
		if start, ok := t.known[m.pid]; ok && start == m.start {
			return true, nil
		}
		v, found, err := readMarker(m.pid)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			unreadable++
		case found && v == g.ID:
			return true, nil
		}
	}
	if unreadable > 0 {
		return false, fmt.Errorf(
			"%w: leader %d is gone and the environment of %d of the %d processes left in group %d cannot be read",
			ErrUnverifiable, g.PID, unreadable, len(members), g.PGID)
	}
	return false, fmt.Errorf("%w: leader %d is gone and none of the %d processes now in group %d carries %s=%s",
		ErrIdentityMismatch, g.PID, len(members), g.PGID, MarkerEnv, g.ID)
}

// markerCandidate reports whether st could carry the group's marker and
// has not been attributed yet. A process older than the leader cannot
// have inherited it, which spares reading most of /proc.
func (t *tracker) markerCandidate(s *snapshot, st stat) bool {
	if st.dead() || st.kernel() || s.excluded[st.pid] || st.pgid == t.g.PGID {
		return false
	}
	if _, ok := t.known[st.pid]; ok {
		return false
	}
	return t.g.Birth.StartTime == 0 || st.start >= t.g.Birth.StartTime
}
