// Package events is what a run reports as it happens, for people and
// programs watching it: the Event values the agent loop and the session
// emit, and their two renderings, JSON Lines (JSONL, `aerie run`'s
// standard output) and lines for a person at a terminal (Human).
//
// It is a leaf beside package transcript: what only watches a run (the
// kubectl plugin following a session's events) links neither the loop nor
// its tools. A session's stored transcript as a file is package atif's.
package events
