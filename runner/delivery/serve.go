package delivery

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// requestLine is what a client sends to ask for the delivery.
const requestLine = "push\n"

// Serve answers every connection to ln with the result of deliver, run
// once, when the first client asks: the runner asks after its agent
// completed, and asks again only if its connection broke. It returns when
// ctx ends.
func Serve(ctx context.Context, ln net.Listener, deliver func(context.Context) Result) error {
	var (
		once sync.Once
		res  Result
	)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept a delivery request: %w", err)
		}
		go func() {
			defer c.Close()
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || line != requestLine {
				return
			}
			once.Do(func() { res = deliver(ctx) })
			_ = json.NewEncoder(c).Encode(res)
		}()
	}
}

// Request asks the delivery server at socket to deliver the work and
// returns its result.
func Request(ctx context.Context, socket string) (Result, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return Result{}, fmt.Errorf("connect to the push container at %s: %w", socket, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write([]byte(requestLine)); err != nil {
		return Result{}, fmt.Errorf("ask the push container: %w", err)
	}
	var r Result
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, context.Cause(ctx))
		}
		return Result{}, fmt.Errorf("read the push container's answer: %w", err)
	}
	return r, nil
}
