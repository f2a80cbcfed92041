package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/session"
	"github.com/aerie-run/aerie/runner/store"
	"github.com/aerie-run/aerie/runner/transcript"
)

func newSessionCompactCmd(a *app) *cobra.Command {
	var (
		f      runFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "compact SESSION [INSTRUCTIONS]",
		Short: "Compact a session's conversation now: summarize its start, keep its recent tail",
		Long: `Compact summarizes the start of SESSION's conversation with the session's
model and keeps its most recent messages as they were, as automatic compaction
does before a request would fill the model's window, but now, whatever the
conversation's size: the 85 % rule and the anti-thrash rule do not apply. The
other gates do: a conversation too short to cut (at least four messages must
go, and a tail of recent messages stays) is not compacted. INSTRUCTIONS, if
given, tell the summarizer what to keep ("keep the failing test names").

The compaction is journaled as automatic ones are; the next aerie run --resume
SESSION continues from the summary and the tail. aerie run --resume SESSION
"/compact [INSTRUCTIONS]" does the same as part of a run. The session's
PreCompact hooks run before (trigger manual), and its SessionStart hooks with
source compact after, their context added to the summary.

An active session (one a run is writing to, or marked active by session switch)
is refused. The model is reached as aerie run reaches it: the session's stored
provider and model unless --provider or --model say otherwise.

--json prints {"session": SESSION, "compacted": true|false, "reason": TEXT,
"messages": N, "tokens_before": N, "tokens_after": N, "provider": P,
"model": M}.

Exit status: 0 when the conversation was compacted, and when it was too short
to compact (nothing to do: compacted is false and reason says why); 1 for every
other failure, such as an unknown or active SESSION or a failed summary.`,
		Example: `  aerie session compact 3f2a
  aerie session compact main "keep the list of files changed"`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.contextWindowSet = cmd.Flags().Changed("context-window")
			return a.sessionCompact(cmd, args, f, asJSON)
		},
	}
	f.modelFlags(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

// sessionCompactJSON is session compact's --json output.
type sessionCompactJSON struct {
	Session      sessionJSON `json:"session"`
	Compacted    bool        `json:"compacted"`
	Reason       string      `json:"reason"`
	Messages     int         `json:"messages"`
	TokensBefore int64       `json:"tokens_before"`
	TokensAfter  int64       `json:"tokens_after"`
	Provider     string      `json:"provider"`
	Model        string      `json:"model"`
}

// sessionCompact is aerie session compact: a resumed run whose prompt is
// /compact, without a time budget, turn budget or events.
func (a *app) sessionCompact(cmd *cobra.Command, args []string, f runFlags, asJSON bool) error {
	f.hookApproval = "deny"
	if err := f.validate(); err != nil {
		return err
	}
	var sess store.Session
	err := withSessions(cmd, a, func(ctx context.Context, s sessions) error {
		var err error
		if sess, err = s.resolve(ctx, args[0]); err != nil {
			return err
		}
		if sess.State == store.StateActive {
			return fmt.Errorf("compact %s: %w: a run may be writing to it; compact it once it has ended, "+
				"or after switching to another session (aerie session switch SESSION)", describeSession(sess), session.ErrActive)
		}
		return nil
	})
	if err != nil {
		return err
	}
	f.resume = sess.ID.String()
	prompt := session.CompactCommand
	if len(args) == 2 && strings.TrimSpace(args[1]) != "" {
		prompt += " " + args[1]
	}
	l, err := a.launch(cmd, f, prompt, nil)
	if err != nil {
		// The session commands exit 1 for every failure.
		if exit, ok := errors.AsType[*cli.ExitError](err); ok && exit.Err != nil {
			return exit.Err
		}
		return err
	}
	defer closeStore(cmd, l.st)
	res := l.rep.Result
	if res.Outcome != transcript.OutcomeCompleted {
		return fmt.Errorf("compact %s: %s: %s", describeSession(sess), res.Outcome, res.Reason)
	}
	out := sessionCompactJSON{
		Session: toSessionJSON(l.rep.Session), Reason: res.Reason,
		Provider: l.rep.Settings.Provider, Model: l.rep.Settings.Model,
	}
	if n := len(res.Compactions); n > 0 {
		p := res.Compactions[n-1]
		out.Compacted, out.Messages, out.TokensBefore, out.TokensAfter = true, p.Messages, p.TokensBefore, p.TokensAfter
		out.Provider, out.Model = p.Provider, p.Model
	}
	if asJSON {
		return cli.WriteJSON(cmd.OutOrStdout(), out)
	}
	w := cli.NewWriter(cmd.OutOrStdout())
	if out.Compacted {
		fmt.Fprintf(w, "Compacted %s: %d messages replaced by a summary (%s %s); estimated tokens %d before, %d after.\n",
			describeSession(sess), out.Messages, out.Provider, out.Model, out.TokensBefore, out.TokensAfter)
	} else {
		fmt.Fprintf(w, "Nothing to compact in %s: %s.\n",
			describeSession(sess), strings.TrimPrefix(res.Reason, "nothing compacted: "))
	}
	return w.Err()
}
