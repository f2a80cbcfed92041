package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/runner/clusterapproval"
	"github.com/aerie-run/aerie/runner/console"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// defaultConsoleAddr is where aerie console listens by default: this
// machine only.
const defaultConsoleAddr = "127.0.0.1:8377"

// consoleFlags are aerie console's options.
type consoleFlags struct {
	addr, db   string
	namespaces []string
	approvers  []string
	readOnly   bool
	cluster    bool
	apiServer  string
}

func newConsoleCmd(a *app) *cobra.Command {
	var f consoleFlags
	cmd := &cobra.Command{
		Use:   "console [--addr HOST:PORT]",
		Short: "Serve a web console of the sessions: transcripts, trees, usage and cost, approvals",
		Long: `Console serves web pages of the session database, for a browser: the
sessions (filtered by namespace, phase, label, model and age, sorted, a page at
a time), a session (its phase, outcome, usage, cost, attempts and layers, its
transcript with tool calls folded, compactions and forks marked and subagents
nested, its workspace diff, exports), the tree of forks and subagents, and an
overview of sessions, tokens and cost per day. A running session's transcript
follows its new entries live.

The console shows the sessions of this directory, as the session commands do,
or those of the --namespace given (repeat it for several; a cluster's sessions
are stored under their namespace). It writes nothing but the approval
decisions of a session paused on a tool call (as aerie approve records them);
--read-only turns those off, and --approver limits them to the users an
authenticating proxy in front names in X-Forwarded-User or X-Forwarded-Email.

With --cluster, the sessions are AgentSessions' and a decision goes to the
AgentSession's spec.approvals instead, for the controller to resume it: only
for a user the proxy names (X-Forwarded-User, groups in X-Forwarded-Groups)
whom the API server allows to patch that AgentSession, as a
SubjectAccessReview asks; the console's own identity then patches it: in a
pod, its service account; else --api-server, a kubectl proxy's address, as
kubectl proxy's user.

It listens on ` + defaultConsoleAddr + ` by default: this machine only. To reach it
from elsewhere, put an authenticating proxy in front rather than listening on
a public address: the console itself authenticates no one.`,
		Example: `  aerie console
  aerie console --namespace agents --db postgres://... --addr 127.0.0.1:9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.console(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defaultConsoleAddr, "listen on `HOST:PORT`")
	fl.StringVar(&f.db, "db", "",
		"the session database `URL` (default: $"+runconfig.DatabaseURLEnv+", then database_url of the global config)")
	fl.StringArrayVar(&f.namespaces, "namespace", nil,
		"show the sessions of `namespace` (repeatable; default: this directory's sessions)")
	fl.StringArrayVar(&f.approvers, "approver", nil,
		"only `user` (as a proxy's X-Forwarded-User or X-Forwarded-Email names) may decide approvals (repeatable)")
	fl.BoolVar(&f.readOnly, "read-only", false, "decide no approvals: write nothing")
	fl.BoolVar(&f.cluster, "cluster", false,
		"decide approvals in the AgentSessions' spec.approvals, for users the API server allows to patch them")
	fl.StringVar(&f.apiServer, "api-server", "",
		"with --cluster, reach the API server at `URL`, a kubectl proxy's (default: the pod's service account)")
	return cmd
}

// console is aerie console: it serves until the command's context ends.
func (a *app) console(cmd *cobra.Command, f consoleFlags) error {
	ctx := cmd.Context()
	dir, err := a.workDir()
	if err != nil {
		return fmt.Errorf("find the current directory: %w", err)
	}
	tenants := f.namespaces
	if len(tenants) == 0 {
		tenants = []string{dir}
	}
	st, err := a.openExported(cmd, dir, f.db)
	if err != nil {
		return err
	}
	defer closeStore(cmd, st)
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	o := console.Options{Store: st, Tenants: tenants, ReadOnly: f.readOnly,
		Approvers: f.approvers, Version: a.version, Log: log}
	if f.cluster && !f.readOnly {
		if o.Cluster, err = consoleCluster(f.apiServer); err != nil {
			return err
		}
	}
	h, err := console.New(o)
	if err != nil {
		return err
	}
	defer h.Close()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("console: --addr %s: %w (choose a free HOST:PORT)", f.addr, err)
	}
	if _, err := fmt.Fprintf(cmd.OutOrStdout(), "aerie console on http://%s/ (Ctrl-C stops it)\n", ln.Addr()); err != nil {
		return err
	}
	return serveConsole(ctx, ln, h)
}

// consoleCluster is the client aerie console --cluster decides with: as
// the pod's service account, or through the kubectl proxy at apiServer.
func consoleCluster(apiServer string) (*clusterapproval.Client, error) {
	if apiServer != "" {
		u, err := url.Parse(apiServer)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf(
				"console: --api-server %q: want an http(s)://HOST:PORT URL, as kubectl proxy prints", apiServer)
		}
		return &clusterapproval.Client{Server: apiServer, HTTP: &http.Client{Timeout: 30 * time.Second}}, nil
	}
	c, err := clusterapproval.InCluster()
	if err != nil {
		return nil, fmt.Errorf("console: --cluster: %w (outside a pod, run kubectl proxy and give --api-server)", err)
	}
	return c, nil
}

// serveConsole serves h on ln until ctx ends, then shuts down, giving open
// requests (a live transcript's events) a few seconds.
func serveConsole(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("console: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("console: shut down: %w", err)
	}
	return nil
}
