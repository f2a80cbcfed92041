package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aerie-run/aerie/cmd/internal/cli"
)

// prompter asks questions on a terminal.
type prompter struct {
	in  *bufio.Reader
	out *cli.Writer
}

// ask prints the question, with shown (the default) in brackets when it is
// not empty, and returns the trimmed answer; "" means the user just pressed
// Enter. End of input (Ctrl-D) and a canceled ctx (Ctrl-C) are errCanceled;
// a question that cannot be written is not waited on: it is out's error.
//
// The read runs on its own goroutine so that Ctrl-C ends the question at
// once; a read still blocked after that is abandoned, which is harmless
// because the command returns and the process exits.
func (p *prompter) ask(ctx context.Context, question, shown string) (string, error) {
	if shown != "" {
		fmt.Fprintf(p.out, "%s [%s]: ", question, shown)
	} else {
		fmt.Fprintf(p.out, "%s: ", question)
	}
	if err := p.out.Err(); err != nil {
		return "", err
	}
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := p.in.ReadString('\n')
		ch <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(p.out)
		return "", errCanceled
	case a := <-ch:
		switch {
		case errors.Is(a.err, io.EOF) && a.line == "":
			fmt.Fprintln(p.out)
			return "", errCanceled
		case a.err != nil && !errors.Is(a.err, io.EOF):
			return "", fmt.Errorf("read answer: %w", a.err)
		}
		return strings.TrimSpace(a.line), nil
	}
}

// confirm asks a yes/no question; Enter picks def.
func (p *prompter) confirm(ctx context.Context, question string, def bool) (bool, error) {
	choices := "y/N"
	if def {
		choices = "Y/n"
	}
	for {
		ans, err := p.ask(ctx, question, choices)
		if err != nil {
			return false, err
		}
		switch strings.ToLower(ans) {
		case "":
			return def, nil
		case "y", "yes":
			return true, nil
		case "n", "no":
			return false, nil
		}
		fmt.Fprintln(p.out, "Please answer y or n.")
	}
}
