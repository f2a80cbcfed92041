// Package faults is aerie's fault-injection suite: it runs real `aerie run`
// processes against the fake model server (hack/testenv), SQLite files and
// PostgreSQL, injects faults at random points — SIGKILL of the runner, a
// database made unreachable or stalled through a TCP proxy, a full disk, a
// foreign write lock, a misbehaving model server, hook and tool bombs, a
// fork bomb under a cgroup pids limit — and checks the session
// invariants after every fault:
//
//   - the entries of every session are numbered contiguously from 1;
//   - every entry read back after a fault (committed, hence acknowledged)
//     is still there, byte-identical, at the end;
//   - no entry, tool call or tool result is stored twice;
//   - every tool call is answered exactly once in the conversation the
//     resumed session sends the model;
//   - no process a session started is alive after the session ends;
//   - no tool call is made again after a crash: each tool's side effect,
//     a line appended to a file outside the runner, happens once.
//
// The cluster tests run the controller as a process (killed and started
// again) against a control plane whose API server they restart, with the
// pod runner of hack/testenv, and check besides: no runner pod created
// twice, none orphaned or left running, every session in its phase.
//
// The tests are the suite; `make test-faults` runs a bounded version (a few
// minutes on two cores) and FAULTS_SCALE=N multiplies the sessions and
// faults for a longer one. Every run prints its counts (faults injected,
// sessions, entries, violations) and fails on any violation.
package faults
