// Package mcp connects the agent to Model Context Protocol servers and
// offers their tools to the model as mcp__<id>__<tool>.
//
// Servers are declared in mcp_servers/<id>.yaml in the extension layers
// (Load; the nearest declaration of an id wins) and in enabled plugins
// (Config.AddPlugin; a Claude or Codex plugin's .mcp.json,
// Config.AddClaudePlugin). A Manager connects them when the session starts:
// stdio servers are started through the executor, each in a process
// group of its own in the workspace, with a secret-free environment, and
// torn down with the session; http and sse servers are reached with the
// SDK's streamable HTTP and SSE transports. A required server that cannot
// connect fails the start (and, later, the turn: see Manager.Ensure);
// any other is skipped with a warning.
//
// The protocol itself is the official Go SDK's
// (github.com/modelcontextprotocol/go-sdk).
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/process"
	"github.com/aerie-run/aerie/runner/tools"
)

// Options configure a Manager.
type Options struct {
	// Commands start stdio servers: the session's executor.
	Commands Commands
	// Dir is the working directory stdio servers start in.
	Dir string
	// On, when set, gives the session's executor name, besides the
	// default (ExecutorLocal), with the directory stdio servers start in
	// there: a stdio server whose executors list it runs there too, one
	// connection per executor, its tools named mcp__<id>__<tool>__<name>.
	// An executor it does not know fails that connection.
	On func(name string) (cmds Commands, dir string, ok bool)
	// Base is the environment stdio servers inherit, filtered by
	// executor.Environ (nothing secret passes): os.Environ() when nil.
	// Pass names more variables to let through.
	Base []string
	Pass []string
	// HTTPClient reaches http and sse servers; its Transport is used,
	// with each server's headers added. http.DefaultTransport when nil.
	HTTPClient *http.Client
	// Version is aerie's version, sent to servers as the client's.
	Version string
	// ExitWait is how long a stdio server may take to exit once its input
	// is closed, before its group is torn down; 2 s when zero.
	ExitWait time.Duration
	// Logger receives the warnings of servers that are skipped. Nil
	// discards.
	Logger *slog.Logger

	// dial, for tests, replaces the transport of a server.
	dial func(Server) sdk.Transport
}

// State is a server's connection state.
type State string

const (
	StateConnecting State = "connecting"
	StateConnected  State = "connected"
	// StateFailed servers could not connect, or lost their connection.
	StateFailed State = "failed"
	StateClosed State = "closed"
)

// ServerStatus describes a server, for `aerie mcp list` and the session's
// report.
type ServerStatus struct {
	ID string `json:"id"`
	// Executor is the executor a stdio server runs on when it is not the
	// default.
	Executor string `json:"executor,omitempty"`
	Type     Type   `json:"type"`
	Required bool   `json:"required,omitempty"`
	State    State  `json:"state"`
	// Error says why the server is not connected.
	Error string `json:"error,omitempty"`
	// Server names the server's implementation, as it introduced itself.
	Server string `json:"server,omitempty"`
	// Tools are the names the model calls the server's tools by.
	Tools []string `json:"tools,omitempty"`
	// Warnings are the server's tools that are not offered, and why.
	Warnings []string `json:"warnings,omitempty"`
}

// Manager holds the connections to a session's servers.
type Manager struct {
	opts    Options
	conns   []*conn
	client  *sdk.Client
	started bool

	// life bounds every connection, and the stdio servers' process
	// groups with them; cancel ends it. Kept because transports tie what
	// they start to a context.
	life   context.Context
	cancel context.CancelFunc
}

// New returns a Manager for servers; Start connects them.
func New(servers []Server, opts Options) *Manager {
	if opts.ExitWait == 0 {
		opts.ExitWait = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	client := sdk.NewClient(
		&sdk.Implementation{Name: "aerie", Version: version},
		&sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}},
	)
	m := &Manager{opts: opts, client: client}
	for _, srv := range servers {
		if srv.Disabled {
			continue
		}
		for _, exec := range connExecutors(srv) {
			c := &conn{m: m, srv: srv, exec: exec, state: StateConnecting}
			m.conns = append(m.conns, c)
		}
	}
	return m
}

// connExecutors are the executors a server has a connection on: each of
// a stdio server's executors, once; an http or sse server is reached from
// the runner, once.
func connExecutors(srv Server) []string {
	if srv.Type != TypeStdio || len(srv.Executors) == 0 {
		return []string{ExecutorLocal}
	}
	var out []string
	for _, e := range srv.Executors {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// Start connects every server at once, each attempt bounded by its
// startup timeout, and lists their tools. ctx is the session's: the
// stdio servers live no longer than it. A server that cannot connect is
// skipped with a warning, unless it is required: then Start returns an
// error naming every such server (the launch fails); the others stay
// connected until Close.
func (m *Manager) Start(ctx context.Context) error {
	if m.started {
		return errors.New("start MCP servers: already started")
	}
	m.started = true
	m.life, m.cancel = context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range m.conns {
		wg.Go(func() { c.connect(ctx) })
	}
	wg.Wait()
	return m.requiredErr()
}

// Ensure reconnects, one attempt each and all at once, the required
// servers that are not connected and the others whose connection was
// lost (an optional server that never connected offers no tools, so it
// is not retried), and returns an error naming the required ones that
// still cannot connect. The loop calls it before each turn: a required
// server that is gone fails the turn.
func (m *Manager) Ensure(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, c := range m.conns {
		c.mu.Lock()
		retry := c.state == StateFailed && (c.srv.Required || c.listed)
		c.mu.Unlock()
		if retry {
			wg.Go(func() { c.connect(ctx) })
		}
	}
	wg.Wait()
	return m.requiredErr()
}

// ErrRequired is wrapped by the errors of Start and Ensure: a required
// server cannot connect.
var ErrRequired = errors.New("a required MCP server cannot connect")

// requiredError is one required server that cannot connect.
type requiredError struct {
	id, file, reason string
}

func (e *requiredError) Error() string {
	return fmt.Sprintf("required MCP server %s (%s): %s", e.id, e.file, e.reason)
}

func (e *requiredError) Unwrap() error { return ErrRequired }

func (m *Manager) requiredErr() error {
	var errs []error
	for _, c := range m.conns {
		if st := c.status(); c.srv.Required && st.State != StateConnected {
			errs = append(errs, &requiredError{id: c.label(), file: c.srv.File, reason: st.Error})
		}
	}
	return errors.Join(errs...)
}

// Tools returns the tools of the connected servers, server by server in
// id order, each server's in the order it lists them. The set is fixed
// when Start returns: a server that connects later (Ensure) serves the
// tools it had, or none if it never connected.
func (m *Manager) Tools() []tools.Tool {
	var out []tools.Tool
	for _, c := range m.conns {
		c.mu.Lock()
		for _, t := range c.tools {
			out = append(out, t)
		}
		c.mu.Unlock()
	}
	return out
}

// Status describes every server, in id order.
func (m *Manager) Status() []ServerStatus {
	out := make([]ServerStatus, len(m.conns))
	for i, c := range m.conns {
		out[i] = c.status()
	}
	return out
}

// Close closes every connection: a stdio server's input is closed, and
// its process group torn down.
func (m *Manager) Close() error {
	var errs []error
	for _, c := range m.conns {
		if err := c.close(); err != nil {
			errs = append(errs, fmt.Errorf("close MCP server %s: %w", c.label(), err))
		}
	}
	if m.cancel != nil {
		m.cancel()
	}
	return errors.Join(errs...)
}

// conn is the connection to one server.
type conn struct {
	m   *Manager
	srv Server
	// exec is the executor a stdio server runs on: ExecutorLocal, the
	// default, or one Options.On knows.
	exec string

	mu      sync.Mutex
	state   State
	err     string
	session *sdk.ClientSession
	// end ends the session's context, once the session is closed.
	end      context.CancelFunc
	name     string
	tools    []*Tool
	warnings []string
	listed   bool // the tools were listed once; the set is then fixed
}

func (c *conn) status() ServerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ServerStatus{
		ID: c.srv.ID, Executor: c.other(), Type: c.srv.Type, Required: c.srv.Required,
		State: c.state, Error: c.err, Server: c.name, Warnings: slices.Clone(c.warnings),
	}
	for _, t := range c.tools {
		st.Tools = append(st.Tools, t.name)
	}
	return st
}

// transport returns a fresh transport to the server, and for a stdio
// server the process behind it.
func (c *conn) transport() (sdk.Transport, *processTransport) {
	if c.m.opts.dial != nil {
		return c.m.opts.dial(c.srv), nil
	}
	switch c.srv.Type {
	case TypeHTTP:
		return &sdk.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: httpClient(c.srv, c.m.opts.HTTPClient)}, nil
	case TypeSSE:
		return &sdk.SSEClientTransport{Endpoint: c.srv.URL, HTTPClient: httpClient(c.srv, c.m.opts.HTTPClient)}, nil
	}
	cmds, dir := c.m.opts.Commands, c.m.opts.Dir
	if c.exec != ExecutorLocal {
		var ok bool
		if c.m.opts.On != nil {
			cmds, dir, ok = c.m.opts.On(c.exec)
		}
		if !ok {
			cmds = noExecutor(c.exec)
		}
	}
	pt := &processTransport{
		cmds: cmds, exitWait: c.m.opts.ExitWait,
		cmd: stdioCommand(c.srv, dir, c.m.opts.Base, c.m.opts.Pass),
	}
	return pt, pt
}

// label names the connection in messages: the server's id, and where it
// runs when that is not the default.
func (c *conn) label() string {
	if c.exec == ExecutorLocal {
		return c.srv.ID
	}
	return c.srv.ID + " on executor " + c.exec
}

// other is the executor the connection is on, "" for the default.
func (c *conn) other() string {
	if c.exec == ExecutorLocal {
		return ""
	}
	return c.exec
}

// noExecutor is the commands of an executor the session does not have:
// starting a server there fails, naming it.
type noExecutor string

func (n noExecutor) Start(context.Context, executor.Command) (executor.Process, error) {
	return nil, fmt.Errorf("the session has no executor %q", string(n))
}

func (n noExecutor) Teardown(context.Context, string) (process.Report, error) {
	return process.Report{}, executor.ErrNotFound
}

// connect makes one connection attempt, bounded by the startup timeout,
// and lists the server's tools the first time it succeeds.
func (c *conn) connect(ctx context.Context) {
	c.mu.Lock()
	if c.state == StateClosed {
		c.mu.Unlock()
		return
	}
	old, oldEnd := c.session, c.end
	c.session, c.end, c.state = nil, nil, StateConnecting
	c.mu.Unlock()
	if old != nil {
		_ = old.Close()
		oldEnd()
	}
	start := time.Now()
	session, end, name, err := c.dial(ctx)
	if err == nil && !c.isListed() {
		err = c.list(ctx, session, start)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if session != nil && (err != nil || c.state == StateClosed) {
		go func() {
			_ = session.Close()
			end()
		}()
	}
	if c.state == StateClosed { // closed meanwhile
		return
	}
	if err != nil {
		// The error may quote the server's URL or its standard error: what
		// its declaration read from the environment is masked.
		c.state, c.err = StateFailed, c.srv.Resolved.Mask(err.Error())
		if !c.srv.Required {
			c.m.opts.Logger.Warn("MCP server skipped", "server", c.label(), "file", c.srv.File, "error", c.err)
		}
		return
	}
	c.session, c.end, c.name, c.state, c.err = session, end, name, StateConnected, ""
	go c.watch(session, end)
}

func (c *conn) isListed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listed
}

// dial connects and initializes a session within the startup timeout.
// The session's transport lives in a context of its own, derived from
// the manager's: end ends it once the session is closed.
func (c *conn) dial(ctx context.Context) (_ *sdk.ClientSession, end context.CancelFunc, _ string, _ error) {
	tr, pt := c.transport()
	ctx, cancel := context.WithTimeout(ctx, c.srv.StartupTimeout)
	defer cancel()
	life, end := context.WithCancel(c.m.life)
	// Until the session is up, the attempt's end is the connection's.
	stop := context.AfterFunc(ctx, end)
	session, err := c.m.client.Connect(ctx, boundTransport{Transport: tr, ctx: life}, nil)
	if err == nil && !stop() {
		_ = session.Close()
		err = ctx.Err()
	}
	if err != nil {
		defer end()
		reason := err.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			reason = fmt.Sprintf("no answer within the startup timeout of %s", c.srv.StartupTimeout)
		}
		if pt != nil {
			if f := pt.failure(); f != "" {
				reason += "; " + f
			}
			// A server that started but did not answer in time is ended
			// now, not at the end of the session.
			pt.close()
		}
		return nil, nil, "", fmt.Errorf("connect: %s", reason)
	}
	name := ""
	if res := session.InitializeResult(); res != nil && res.ServerInfo != nil {
		name = res.ServerInfo.Name
		if res.ServerInfo.Version != "" {
			name += " " + res.ServerInfo.Version
		}
	}
	return session, end, name, nil
}

// toolName is what model APIs accept as a tool name.
var toolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`) })

// list lists the server's tools, within what is left of the startup
// timeout, and keeps those offered: the ones the tools filter names (all
// without one) whose full names model APIs accept.
func (c *conn) list(ctx context.Context, session *sdk.ClientSession, start time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, start.Add(c.srv.StartupTimeout))
	defer cancel()
	var list []*sdk.Tool
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("list tools: no answer within the startup timeout of %s", c.srv.StartupTimeout)
			}
			return fmt.Errorf("list tools: %w", err)
		}
		list = append(list, t)
	}
	var offered []*Tool
	var warnings []string
	seen := make(map[string]bool)
	for _, t := range list {
		if seen[t.Name] {
			warnings = append(warnings, fmt.Sprintf("tool %q is listed twice; the first is offered", t.Name))
			continue
		}
		seen[t.Name] = true
		if c.srv.Tools != nil && !slices.Contains(c.srv.Tools, t.Name) {
			continue
		}
		name := "mcp__" + c.srv.ID + "__" + t.Name
		if c.exec != ExecutorLocal {
			name += "__" + c.exec
		}
		if !toolName().MatchString(name) {
			warnings = append(warnings, fmt.Sprintf(
				"tool %q is not offered: %s is not a name model APIs accept (letters, digits, _ and -, at most 128)",
				t.Name, name))
			continue
		}
		tool, err := newTool(c, name, t)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("tool %q is not offered: %v", t.Name, err))
			continue
		}
		offered = append(offered, tool)
	}
	for _, want := range c.srv.Tools {
		if !seen[want] {
			warnings = append(warnings, fmt.Sprintf("tools lists %q, which the server does not have", want))
		}
	}
	for _, w := range warnings {
		c.m.opts.Logger.Warn("MCP tool skipped", "server", c.label(), "warning", w)
	}
	c.mu.Lock()
	c.tools, c.warnings, c.listed = offered, warnings, true
	c.mu.Unlock()
	return nil
}

// watch marks the connection lost when the session ends by itself.
func (c *conn) watch(session *sdk.ClientSession, end context.CancelFunc) {
	err := session.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != session || c.state != StateConnected {
		return // closed, or replaced
	}
	end()
	c.session, c.end, c.state = nil, nil, StateFailed
	c.err = "the connection was lost"
	if err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
		c.err += ": " + c.srv.Resolved.Mask(err.Error())
	}
	c.m.opts.Logger.Warn("MCP server connection lost", "server", c.label(), "error", c.err)
}

// current returns the live session, or why there is none.
func (c *conn) current() (*sdk.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		if c.err != "" {
			return nil, fmt.Errorf("MCP server %s is not connected: %s", c.label(), c.err)
		}
		return nil, fmt.Errorf("MCP server %s is not connected", c.label())
	}
	return c.session, nil
}

func (c *conn) close() error {
	c.mu.Lock()
	session, end := c.session, c.end
	c.session, c.end, c.state, c.err = nil, nil, StateClosed, "closed"
	c.mu.Unlock()
	if session == nil {
		return nil
	}
	err := session.Close()
	end()
	if err != nil && (errors.Is(err, sdk.ErrConnectionClosed) || strings.Contains(err.Error(), "closed")) {
		return nil
	}
	return err
}
