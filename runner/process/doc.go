// Package process manages the process groups that run the agent's tools:
// it starts each command as the leader of a new group, fingerprints it so a
// reused PID is never signalled, tears a group down (SIGTERM, grace,
// SIGKILL, then a sweep of the descendants that left the group), reaps
// orphans as a child subreaper, keeps durable records of the groups a
// headless run leaves running, and keeps a ledger of the groups a run is
// running, so that those of a run killed outright are ended by the next
// (see [Ledger]).
//
// Linux only: identity and descendants are read from /proc.
//
// # Identity
//
// A PID alone names a process only while it lives; afterwards the kernel
// hands the number to someone else. A [Group] therefore carries the
// leader's birth [Fingerprint] (its start time, field 22 of
// /proc/<pid>/stat, with the boot id and the PID namespace that give it a
// meaning), and every command inherits a marker
// in its environment ([MarkerEnv]=<group id>). Before anything is
// signalled, the leader's start time must match; when the leader is gone,
// the group's surviving members must carry the marker. Single processes
// are signalled through a pidfd opened before their start time is
// re-checked, so the check and the signal name the same process.
//
// A process group id cannot be reused while any process still has it as
// its group, or as its own PID: the kernel keeps the number allocated.
// kill(-pgid) is therefore sent only after a live member or the leader
// has been verified in the same pass.
//
// # Escaped descendants
//
// A command can leave its group (setsid, setpgid, or a shell with job
// control) and its parent can exit, so that the escapee is reparented to
// the nearest child subreaper or to init. Teardown finds such processes
// in two ways: as descendants, in the parent→children map built from
// /proc/*/stat, of any process it already knows belongs to the group; and
// by the marker, which they inherited at fork and keep unless they
// exec with a scrubbed environment.
package process
