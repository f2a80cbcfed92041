package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/aerie-run/aerie/runner/executor"
	"github.com/aerie-run/aerie/runner/executor/mtls"
	"github.com/aerie-run/aerie/runner/session"
)

// dialTimeout bounds reaching one --executor, its handshakes included.
const dialTimeout = 15 * time.Second

// remoteFlag is one --executor NAME=ADDR.
type remoteFlag struct{ name, addr string }

// parseExecutors checks --executor NAME=ADDR (each) and
// --executor-credential, without reaching anything.
func parseExecutors(vals []string, credential string) ([]remoteFlag, error) {
	var out []remoteFlag
	for _, v := range vals {
		name, addr, ok := strings.Cut(v, "=")
		if !ok || name == "" || addr == "" {
			return nil, fmt.Errorf("--executor %q: want NAME=HOST:PORT, as --executor tools=10.0.0.5:7070", v)
		}
		if err := session.CheckExecutorName(name); err != nil {
			return nil, fmt.Errorf("--executor %s: %w", v, err)
		}
		if err := mtls.ValidName(name); err != nil {
			return nil, fmt.Errorf("--executor %s: %w", v, err)
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return nil, fmt.Errorf("--executor %s: %q is not HOST:PORT, where aerie executor serve --listen serves", v, addr)
		}
		for _, o := range out {
			if o.name == name {
				return nil, fmt.Errorf("--executor %s: %q is named twice; give each executor its own name", v, name)
			}
		}
		out = append(out, remoteFlag{name: name, addr: addr})
	}
	switch {
	case len(out) > 0 && credential == "":
		return nil, errors.New("--executor needs --executor-credential FILE: the runner's runner.pem, " +
			"written by aerie executor credentials with the executors' NAME.pem")
	case len(out) == 0 && credential != "":
		return nil, errors.New("--executor-credential is for --executor NAME=ADDR: name the executors to reach")
	}
	return out, nil
}

// dialExecutors reaches every --executor with the runner's credential in
// credential, at once. closeAll ends the connections.
func dialExecutors(
	ctx context.Context, flags []remoteFlag, credential string,
) (_ []session.NamedExecutor, closeAll func(), _ error) {
	closeAll = func() {}
	if len(flags) == 0 {
		return nil, closeAll, nil
	}
	cred, err := mtls.Load(credential)
	if err != nil {
		return nil, closeAll, fmt.Errorf("--executor-credential: %w", err)
	}
	if !cred.IsRunner() {
		return nil, closeAll, fmt.Errorf("--executor-credential: %s is executor %s's credential; "+
			"aerie run reaches the executors with the runner's runner.pem", credential, cred.Name())
	}
	if exp := cred.NotAfter(); time.Now().After(exp) {
		return nil, closeAll, fmt.Errorf(
			"--executor-credential: %s expired at %s; generate a fresh set with aerie executor credentials",
			credential, exp.UTC().Format(time.RFC3339))
	}
	remotes := make([]*executor.Remote, len(flags))
	errs := make([]error, len(flags))
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	done := make(chan int, len(flags))
	for i, f := range flags {
		go func() {
			remotes[i], errs[i] = executor.DialTCP(dctx, f.addr, f.name, cred)
			done <- i
		}()
	}
	for range flags {
		<-done
	}
	closeAll = func() {
		for _, r := range remotes {
			if r != nil {
				_ = r.Close(context.WithoutCancel(ctx)) // its groups end with the connection
			}
		}
	}
	var named []session.NamedExecutor
	for i, f := range flags {
		if errs[i] != nil {
			closeAll()
			return nil, func() {}, fmt.Errorf("--executor %s=%s: cannot reach the executor at %s: %w; "+
				"start it there with aerie executor serve --listen %s --credential %s.pem",
				f.name, f.addr, f.addr, errs[i], f.addr, f.name)
		}
		named = append(named, session.NamedExecutor{Name: f.name, Executor: remotes[i]})
	}
	return named, closeAll, nil
}
