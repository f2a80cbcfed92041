package mcp

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkConnectInMemory measures the protocol's part of connecting a
// server: initialize and list its tools, over the SDK's in-memory
// transport.
func BenchmarkConnectInMemory(b *testing.B) {
	mem := newMemServers(b)
	for b.Loop() {
		m := New([]Server{srv("t")}, Options{dial: mem.dial})
		if err := m.Start(b.Context()); err != nil || len(m.Tools()) != len(testToolNames) {
			b.Fatal(err)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConnectStdio measures a stdio server from start to tool list
// through the executor: process group, pipes, the server process's own
// start (a Go binary), initialize, tools/list. start-ns/op is that part;
// ns/op adds closing (input closed, exit, group torn down).
func BenchmarkConnectStdio(b *testing.B) {
	l, dir := workspace(b)
	s := selfServer(b, "t", "serve")
	var start time.Duration
	for b.Loop() {
		m := New([]Server{s}, Options{Commands: l, Dir: dir})
		t0 := time.Now()
		if err := m.Start(b.Context()); err != nil || len(m.Tools()) != len(testToolNames) {
			b.Fatal(err)
		}
		start += time.Since(t0)
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(start.Nanoseconds())/float64(b.N), "start-ns/op")
}

// BenchmarkCallStdio measures one tool call to a stdio server through
// the executor's pipes.
func BenchmarkCallStdio(b *testing.B) {
	l, dir := workspace(b)
	m := New([]Server{selfServer(b, "t", "serve")}, Options{Commands: l, Dir: dir})
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	tool := m.Tools()[0]
	for _, t := range m.Tools() {
		if t.Name() == "mcp__t__echo" {
			tool = t
		}
	}
	args := json.RawMessage(`{"text":"hello"}`)
	for b.Loop() {
		if r := tool.Run(b.Context(), args); r.IsError || r.Content != "hello" {
			b.Fatal(r)
		}
	}
}

// BenchmarkStartProcess measures what BenchmarkConnectStdio's start
// includes besides MCP: the same binary started through the executor,
// exiting at once. The difference is the cost of MCP itself, without
// the server's own start-up.
func BenchmarkStartProcess(b *testing.B) {
	l, dir := workspace(b)
	cmd := stdioCommand(selfServer(b, "t", "exit"), dir, nil, nil)
	for b.Loop() {
		p, err := l.Start(b.Context(), cmd)
		if err != nil {
			b.Fatal(err)
		}
		if exit, err := p.Wait(b.Context()); err != nil || exit.Code != 0 {
			b.Fatal(exit, err)
		}
		if _, err := l.Teardown(b.Context(), p.ID()); err != nil {
			b.Fatal(err)
		}
	}
}
