package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	aeriev1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/cmd/internal/cli"
	"github.com/aerie-run/aerie/runner/events"
	"github.com/aerie-run/aerie/runner/runconfig"
)

type submitFlags struct {
	kube               kubeFlags
	file, prompt, name string
	provider, model    string
	apiKeySecret       string
	wait, follow       bool
	timeout            time.Duration
	eventsJSONL        bool
	// diff prints the session's workspace diff, from the store at db,
	// once it has finished.
	diff bool
	db   string
}

func newSubmitCmd(a *app) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit (-f FILE | --prompt TEXT)",
		Short: "Create an AgentSession in a cluster and, with --wait, exit with its outcome",
		Long: `Submit creates an AgentSession: the one in FILE (YAML or JSON; - is standard
input), or one built from --prompt and the model flags. With --wait it then
waits until the session has finished and exits with its outcome, using the
exit codes of aerie run (0 completed, 2 configuration error, 3 model or API
failure, 4 budget spent, 5 paused awaiting approval, 6 no valid structured
result, 143 cancelled, 1 anything else), so a CI job can
fail on a failed session. --follow also streams the session's events from its
runner pod while it runs. On a terminal the progress is shown for a person;
otherwise as JSON Lines. --diff (with --wait) then prints what the session
changed in its git workspace, from the session store (as get NAME --diff
does), on standard error, so that standard output stays the progress.

Exit status without --wait: 0 when the session was created; 2 when the
manifest or the flags are invalid (the API server's validation message is
shown); 1 for other failures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.submit(cmd, f) },
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &cli.ExitError{Code: runconfig.ExitConfig, Err: err}
	})
	fl := cmd.Flags()
	f.kube.add(fl)
	fl.StringVarP(&f.file, "filename", "f", "", "the AgentSession manifest `file` (- for standard input)")
	fl.StringVar(&f.prompt, "prompt", "", "build the session from this prompt `text` and the flags below instead")
	fl.StringVar(&f.name, "name", "", "the session's `name` with --prompt (default: a generated one)")
	fl.StringVar(&f.provider, "provider", "anthropic", "the model `provider` with --prompt")
	fl.StringVar(&f.model, "model", "claude-sonnet-4-5", "the `model` with --prompt")
	fl.StringVar(&f.apiKeySecret, "api-key-secret", "",
		"the Secret holding the model API key with --prompt, as `NAME/KEY`")
	fl.BoolVar(&f.wait, "wait", false, "wait until the session has finished and exit with its outcome")
	fl.BoolVar(&f.follow, "follow", false, "stream the session's events while it runs (implies --wait)")
	fl.DurationVar(&f.timeout, "timeout", 0, "give up waiting after this `duration` (0: no limit)")
	fl.BoolVar(&f.eventsJSONL, "events-jsonl", false, "write JSON Lines even on a terminal")
	fl.BoolVar(&f.diff, "diff", false,
		"with --wait, print the session's workspace diff from the session store on standard error once it has finished")
	fl.StringVar(&f.db, "db", "",
		"the session store's database `URL`, for --diff (default: $"+runconfig.DatabaseURLEnv+")")
	return cmd
}

// submitted is the JSON Lines record of the submit commands.
type submitted struct {
	Type      string                    `json:"type"`
	Time      time.Time                 `json:"time"`
	Namespace string                    `json:"namespace"`
	Name      string                    `json:"name"`
	Phase     aeriev1.AgentSessionPhase `json:"phase,omitempty"`
	SessionID string                    `json:"session_id,omitempty"`
	Result    *aeriev1.Result           `json:"result,omitempty"`
	Usage     *aeriev1.Usage            `json:"usage,omitempty"`
	Event     *events.Event             `json:"event,omitempty"`
}

func (a *app) submit(cmd *cobra.Command, f submitFlags) (err error) {
	ctx := cmd.Context()
	configErr := func(err error) error { return &cli.ExitError{Code: runconfig.ExitConfig, Err: err} }
	if (f.diff || cmd.Flags().Changed("db")) && (!f.diff || (!f.wait && !f.follow)) {
		return configErr(errors.New("--diff goes with --wait (or --follow), and --db with --diff"))
	}
	if f.diff {
		f.db = cmp.Or(f.db, os.Getenv(runconfig.DatabaseURLEnv))
		if f.db == "" {
			return configErr(fmt.Errorf("--diff reads the session store: give its URL with --db or $%s",
				runconfig.DatabaseURLEnv))
		}
	}
	sess, err := f.session(cmd.InOrStdin())
	if err != nil {
		return configErr(err)
	}
	kc, err := f.kube.client()
	if err != nil {
		return configErr(err)
	}
	if sess.Namespace != "" && f.kube.namespace == "" {
		kc.namespace = sess.Namespace
	}
	created, err := kc.create(ctx, sess)
	if err != nil {
		if isInvalid(err) {
			return configErr(fmt.Errorf("create session: %w", err))
		}
		return fmt.Errorf("create session: %w", err)
	}
	out := a.submitOutput(cmd, f.eventsJSONL)
	// The progress is written as the session goes; a write that failed
	// fails the command when it ends, after the session's own outcome.
	defer func() { err = cmp.Or(err, out.err()) }()
	out.status("created", created)
	if !f.wait && !f.follow {
		return nil
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, f.timeout, errWaitTimeout)
		defer cancel()
	}
	var followed chan struct{}
	followCtx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	if f.follow {
		followed = make(chan struct{})
		go func() {
			defer close(followed)
			kc.follow(followCtx, created.Name, out)
		}()
	}
	done, err := kc.wait(ctx, created.Name, settled, func(s *aeriev1.AgentSession) { out.status("status", s) })
	if err != nil {
		return fmt.Errorf("wait for session %s/%s: %w", kc.namespace, created.Name, err)
	}
	if followed != nil {
		// The status can tell the end before the last pod's log has been
		// read: let the stream finish, so that the events come before the
		// outcome and none is lost, but do not hang on a log that does not
		// end.
		select {
		case <-followed:
		case <-time.After(followDrain):
			stopFollow()
			<-followed
		}
	}
	out.status("finished", done)
	if f.diff {
		// The session's outcome is the command's: a diff that cannot be
		// shown is said, not a failure of its own.
		err := runOnStored(cmd, cmd.ErrOrStderr(), done, f.db, "--diff", "diff", "")
		var reported *cli.ExitError // aerie said why
		if err != nil && !errors.As(err, &reported) {
			_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "no workspace diff: %v\n", err) // a note beside the outcome
		}
	}
	code := exitStatus(done)
	if code == 0 {
		return nil
	}
	msg := fmt.Sprintf("session %s/%s %s", kc.namespace, done.Name, strings.ToLower(string(done.Status.Phase)))
	if r := done.Status.Result; r != nil && r.Message != "" {
		msg += ": " + r.Message
	}
	return &cli.ExitError{Code: code, Err: errors.New(msg)}
}

// session reads or builds the AgentSession to create.
func (f submitFlags) session(stdin io.Reader) (*aeriev1.AgentSession, error) {
	switch {
	case f.file != "" && f.prompt != "":
		return nil, errors.New("-f and --prompt are exclusive: give a manifest or a prompt")
	case f.file == "" && f.prompt == "":
		return nil, errors.New("nothing to submit: give -f FILE or --prompt TEXT")
	case f.prompt != "":
		s := &aeriev1.AgentSession{
			TypeMeta:   metav1.TypeMeta{APIVersion: aeriev1.GroupVersion.String(), Kind: "AgentSession"},
			ObjectMeta: metav1.ObjectMeta{Name: f.name},
			Spec: aeriev1.AgentSessionSpec{
				Prompt: f.prompt,
				Model:  aeriev1.ModelSpec{Provider: aeriev1.ModelProvider(f.provider), Name: f.model},
			},
		}
		if s.Name == "" {
			s.GenerateName = "session-"
		}
		if f.apiKeySecret != "" {
			name, key, ok := strings.Cut(f.apiKeySecret, "/")
			if !ok || name == "" || key == "" {
				return nil, fmt.Errorf("--api-key-secret %q: want NAME/KEY", f.apiKeySecret)
			}
			s.Spec.Model.APIKeySecretRef = &aeriev1.KeyReference{Name: name, Key: key}
		}
		return s, nil
	}
	var data []byte
	var err error
	if f.file == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, 4<<20))
	} else {
		data, err = os.ReadFile(f.file)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.file, err)
	}
	return decodeSession(f.file, data)
}

// decodeSession decodes a manifest, which must be one AgentSession.
func decodeSession(name string, data []byte) (*aeriev1.AgentSession, error) {
	codecs := serializer.NewCodecFactory(sessionScheme(), serializer.EnableStrict)
	obj, gvk, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (want one aerie.run/v1alpha1 AgentSession)", name, err)
	}
	s, ok := obj.(*aeriev1.AgentSession)
	if !ok {
		return nil, fmt.Errorf("%s: a %s, want an aerie.run/v1alpha1 AgentSession", name, gvk.Kind)
	}
	return s, nil
}

// followDrain bounds how long submit --follow waits, once the session has
// finished, for the last runner pod's log to end.
const followDrain = 10 * time.Second

// follow streams the runner pod's events once it has one, reconnecting
// to the next attempt's pod, and returns once the session has finished and
// its last pod's log has been read. The log is a convenience: the outcome
// comes from the status, so failures here are quiet.
func (c *kubeClient) follow(ctx context.Context, name string, out *submitOutput) {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		s, err := c.get(ctx, name)
		if err == nil && s.Status.PodName != "" && !seen[s.Status.PodName] {
			if rc, err := c.logs(ctx, s.Status.PodName, true); err == nil {
				seen[s.Status.PodName] = true
				sc := bufio.NewScanner(rc)
				sc.Buffer(nil, 16<<20)
				for sc.Scan() {
					var ev events.Event
					if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type != "" {
						out.event(s, ev)
					}
				}
				_ = rc.Close() // only read: its Close loses nothing
			}
		}
		if err == nil && settled(s) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollInterval):
		}
	}
}

// submitOutput writes what the submit commands observe: for a person, or as
// JSON Lines.
type submitOutput struct {
	mu    sync.Mutex  // status and events come from two goroutines
	w     *cli.Writer // every write, the encoder's and the events', goes through it
	jsonl *json.Encoder
	human *events.Human
}

func (a *app) submitOutput(cmd *cobra.Command, forceJSONL bool) *submitOutput {
	o := &submitOutput{w: cli.NewWriter(cmd.OutOrStdout())}
	if forceJSONL || a.stdoutIsTerminal == nil || !a.stdoutIsTerminal() {
		o.jsonl = json.NewEncoder(o.w)
		o.jsonl.SetEscapeHTML(false)
	} else {
		o.human = events.NewHuman(o.w)
	}
	return o
}

func (o *submitOutput) status(typ string, s *aeriev1.AgentSession) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.jsonl != nil {
		_ = o.jsonl.Encode(submitted{ // a failed write is o.w's error
			Type: typ, Time: time.Now(), Namespace: s.Namespace, Name: s.Name,
			Phase: s.Status.Phase, SessionID: s.Status.SessionID, Result: s.Status.Result, Usage: s.Status.Usage,
		})
		return
	}
	switch typ {
	case "created":
		fmt.Fprintf(o.w, "● agentsession %s/%s created\n", s.Namespace, s.Name)
	case "status":
		if s.Status.Phase != "" {
			fmt.Fprintf(o.w, "● %s\n", s.Status.Phase)
		}
	case "finished":
		line := fmt.Sprintf("● %s", s.Status.Phase)
		if r := s.Status.Result; r != nil {
			line += fmt.Sprintf(" · %s", r.Outcome)
			if r.Message != "" {
				line += " · " + r.Message
			}
		}
		if u := s.Status.Usage; u != nil {
			line += fmt.Sprintf(" · %d turns, %d tokens", u.Turns, u.TotalTokens)
		}
		fmt.Fprintln(o.w, line)
	}
}

// err is the first write that failed, or nil.
func (o *submitOutput) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Err()
}

func (o *submitOutput) event(s *aeriev1.AgentSession, ev events.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.jsonl != nil {
		_ = o.jsonl.Encode(submitted{ // a failed write is o.w's error
			Type: "event", Time: time.Now(), Namespace: s.Namespace, Name: s.Name, Event: &ev,
		})
		return
	}
	o.human.Observe(ev)
}

func newGetCmd() *cobra.Command {
	var (
		kube                 kubeFlags
		asJSON, diff, result bool
		diffStat             bool
		db                   string
	)
	cmd := &cobra.Command{
		Use:   "get [NAME] [--diff [--stat] | --result]",
		Short: "Show AgentSessions: their phase, outcome, usage and session id",
		Long: `Get shows AgentSessions: their phase, outcome, usage and session id.

NAME --diff prints what the session changed in its git workspace instead,
from the session store, so it works after the runner pod is gone: aerie,
found beside kubectl-aerie or on PATH, runs aerie session diff on the
session's stored id, in its namespace, with the database of --db (default:
$` + runconfig.DatabaseURLEnv + `). --stat prints the stat instead of the patch.

--result prints the structured result NAME got for its spec.result, as JSON:
status.result.structured, or, when it was too large for the status, the
entry status.result.structuredRef names, from the session store: aerie,
found beside kubectl-aerie or on PATH, runs aerie session result on it with
the database of --db (default: $` + runconfig.DatabaseURLEnv + `).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case diff && result:
				return errors.New("--diff and --result print different things: give one")
			case (diff || diffStat) && (!diff || len(args) != 1 || asJSON):
				return errors.New("--stat goes with --diff, and --diff with one NAME and without --json")
			case cmd.Flags().Changed("db") && !diff && !result:
				return errors.New("--db goes with --diff or --result")
			case result && len(args) != 1:
				return errors.New("--result needs the NAME of one AgentSession")
			}
			kc, err := kube.client()
			if err != nil {
				return err
			}
			if diff {
				return kc.diff(cmd, args[0], cmp.Or(db, os.Getenv(runconfig.DatabaseURLEnv)), diffStat)
			}
			if result {
				return kc.result(cmd, args[0], cmp.Or(db, os.Getenv(runconfig.DatabaseURLEnv)))
			}
			var items []aeriev1.AgentSession
			if len(args) == 1 {
				s, err := kc.get(cmd.Context(), args[0])
				if err != nil {
					return fmt.Errorf("get session %s: %w", args[0], err)
				}
				items = []aeriev1.AgentSession{*s}
			} else {
				l, err := kc.list(cmd.Context())
				if err != nil {
					return fmt.Errorf("list sessions: %w", err)
				}
				items = l.Items
			}
			if asJSON {
				return cli.WriteJSON(cmd.OutOrStdout(), items)
			}
			tw := cli.NewTable(cmd.OutOrStdout())
			fmt.Fprintln(tw, "NAME\tPHASE\tOUTCOME\tTURNS\tTOKENS\tSESSION\tAGE")
			for _, s := range items {
				outcome, turns, tokens := "-", int32(0), int64(0)
				if s.Status.Result != nil && s.Status.Result.Outcome != "" {
					outcome = string(s.Status.Result.Outcome)
				}
				if s.Status.Usage != nil {
					turns, tokens = s.Status.Usage.Turns, s.Status.Usage.TotalTokens
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.Name, cli.Dash(string(s.Status.Phase)), outcome,
					turns, tokens, cli.Dash(s.Status.SessionID), cli.Age(time.Now(), s.CreationTimestamp.Time))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return printPushed(cmd.OutOrStdout(), args, items)
		},
	}
	kube.add(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().BoolVar(&diff, "diff", false, "print the session's workspace diff (its patch) from the session store")
	cmd.Flags().BoolVar(&diffStat, "stat", false, "with --diff, print the diff's stat instead of the patch")
	cmd.Flags().StringVar(&db, "db", "",
		"the session store's database `URL`, for --diff or a --result kept only there "+
			"(default: $"+runconfig.DatabaseURLEnv+")")
	cmd.Flags().BoolVar(&result, "result", false, "print the session's structured result (JSON)")
	return cmd
}

// printPushed follows the table of one session that delivered its work
// (spec.workspace.git.push) with how the push went: the commit and branch,
// nothing to push, or why it failed.
func printPushed(w io.Writer, args []string, items []aeriev1.AgentSession) error {
	if len(args) != 1 || len(items) != 1 {
		return nil
	}
	c := meta.FindStatusCondition(items[0].Status.Conditions, aeriev1.ConditionPushed)
	if c == nil {
		return nil
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", c.Reason, c.Message)
	return err
}

func newCancelCmd() *cobra.Command {
	var (
		kube kubeFlags
		wait bool
	)
	cmd := &cobra.Command{
		Use:   "cancel NAME",
		Short: "Cancel an AgentSession: its runner tears its processes down and records the cancel",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, err := kube.client()
			if err != nil {
				return err
			}
			s, err := kc.cancel(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("cancel session %s: %w", args[0], err)
			}
			out := cli.NewWriter(cmd.OutOrStdout())
			fmt.Fprintf(out, "agentsession %s/%s cancel requested\n", s.Namespace, s.Name)
			if !wait {
				return out.Err()
			}
			done, err := kc.wait(cmd.Context(), s.Name, finished, func(*aeriev1.AgentSession) {})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "agentsession %s/%s %s\n", done.Namespace, done.Name, strings.ToLower(string(done.Status.Phase)))
			return out.Err()
		},
	}
	kube.add(cmd.Flags())
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the session has stopped")
	return cmd
}

func newApproveCmd() *cobra.Command {
	var (
		kube   kubeFlags
		deny   bool
		reason string
	)
	cmd := &cobra.Command{
		Use:   "approve NAME [CALL]",
		Short: "Decide the tool call an AgentSession is paused on (spec.approvals); the controller resumes it",
		Long: `Approve adds a decision to the session's spec.approvals: CALL, or the call the session is
paused on (status.pendingApproval). The controller starts the next attempt, which runs the
call, or with --deny refuses it with --reason.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kc, err := kube.client()
			if err != nil {
				return err
			}
			s, err := kc.get(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("get session %s: %w", args[0], err)
			}
			d := aeriev1.ApprovalDecision{Decision: aeriev1.DecisionAllow, Reason: reason}
			if deny {
				d.Decision = aeriev1.DecisionDeny
			}
			switch {
			case len(args) == 2:
				d.CallID = args[1]
			case s.Status.PendingApproval != nil:
				d.CallID = s.Status.PendingApproval.CallID
			default:
				return fmt.Errorf("session %s is not paused on a call (phase %s); name the CALL to decide it in advance",
					s.Name, s.Status.Phase)
			}
			for _, a := range s.Spec.Approvals {
				if a.CallID == d.CallID {
					return fmt.Errorf("session %s: call %s is already decided (%s); decisions cannot be changed",
						s.Name, d.CallID, a.Decision)
				}
			}
			s, err = kc.addApproval(cmd.Context(), s, d)
			if err != nil {
				return fmt.Errorf("approve call %s of session %s: %w", d.CallID, args[0], err)
			}
			out := cli.NewWriter(cmd.OutOrStdout())
			fmt.Fprintf(out, "agentsession %s/%s call %s: %s\n",
				s.Namespace, s.Name, d.CallID, strings.ToLower(string(d.Decision)))
			return out.Err()
		},
	}
	kube.add(cmd.Flags())
	cmd.Flags().BoolVar(&deny, "deny", false, "refuse the call instead of running it")
	cmd.Flags().StringVar(&reason, "reason", "", "the reason, told to the model with a denial and recorded")
	return cmd
}

func newLogsCmd() *cobra.Command {
	var (
		kube                          kubeFlags
		follow, transcript, originals bool
		db, toolOutput                string
	)
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the events of an AgentSession's runner pod (JSON Lines)",
		Long: `Logs prints the JSON Lines events of the session's runner pod.

--transcript prints the session's whole transcript in Markdown instead, from
the session store (every attempt, compacted entries included): aerie, found
beside kubectl-aerie or on PATH, runs aerie session export on the session's
stored id, in its namespace, with the database of --db (default:
$` + runconfig.DatabaseURLEnv + `). A tool result the model saw shortened
(capped, or compressed) is marked in it; --originals shows each original in
full under its result, and --tool-output CALL_ID prints one original's bytes
alone (aerie session output).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := logsFlagsConflict(cmd, transcript, follow, toolOutput != ""); err != nil {
				return err
			}
			kc, err := kube.client()
			if err != nil {
				return err
			}
			db = cmp.Or(db, os.Getenv(runconfig.DatabaseURLEnv))
			switch {
			case transcript:
				return kc.transcript(cmd, args[0], db, originals)
			case toolOutput != "":
				return kc.toolOutput(cmd, args[0], db, toolOutput)
			}
			s, err := kc.get(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("get session %s: %w", args[0], err)
			}
			if s.Status.PodName == "" {
				return fmt.Errorf("session %s has no runner pod yet (phase %s)", s.Name, cli.Dash(string(s.Status.Phase)))
			}
			rc, err := kc.logs(cmd.Context(), s.Status.PodName, follow)
			if err != nil {
				return fmt.Errorf("logs of pod %s: %w", s.Status.PodName, err)
			}
			defer func() { _ = rc.Close() }() // only read: its Close loses nothing
			_, err = io.Copy(cmd.OutOrStdout(), rc)
			return err
		},
	}
	kube.add(cmd.Flags())
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream the log while the pod runs")
	cmd.Flags().BoolVar(&transcript, "transcript", false,
		"print the session's transcript (Markdown) from the session store")
	cmd.Flags().BoolVar(&originals, "originals", false,
		"with --transcript: show the original of each shortened tool result under it")
	cmd.Flags().StringVar(&toolOutput, "tool-output", "",
		"print the byte-exact original of the tool call `CALL_ID`'s shortened result, from the session store")
	cmd.Flags().StringVar(&db, "db", "",
		"the session store's database `URL`, for --transcript and --tool-output (default: $"+runconfig.DatabaseURLEnv+")")
	return cmd
}

// logsFlagsConflict refuses the logs options that do not go together:
// what is read from the store is read once, and only it takes --db.
func logsFlagsConflict(cmd *cobra.Command, transcript, follow, toolOutput bool) error {
	switch {
	case transcript && follow:
		return errors.New("--transcript and --follow are exclusive: the transcript is read from the store once")
	case toolOutput && (transcript || follow):
		return errors.New("--tool-output prints one original alone: give it without --transcript and --follow")
	case cmd.Flags().Changed("originals") && !transcript:
		return errors.New("--originals is for --transcript")
	case !transcript && !toolOutput && cmd.Flags().Changed("db"):
		return errors.New("--db is for --transcript and --tool-output")
	}
	return nil
}
