package runconfig

import (
	"fmt"
	"path"
)

// Paths and environment of the git-push container of a runner pod
// (spec.workspace.git.push).
const (
	// DeliveryDir is the memory-backed emptyDir the git-clone, git-push
	// and agent containers share: the cloned commit and the push socket.
	// The workspace container, where the tools run, does not mount it.
	DeliveryDir = "/run/aerie-delivery"
	// DefaultPushSocket is the git-push container's socket.
	DefaultPushSocket = DeliveryDir + "/push.sock"
	// DefaultBaseFile is where the git-clone container records the
	// commit it checked out.
	DefaultBaseFile = DeliveryDir + "/base"
)

// The git-push container's environment: what to push where, and the
// credentials (from the push Secret, which only that container sees).
const (
	PushURLEnv         = "AERIE_PUSH_URL"
	PushBranchEnv      = "AERIE_PUSH_BRANCH"
	PushMessageEnv     = "AERIE_PUSH_MESSAGE"
	PushAuthorNameEnv  = "AERIE_PUSH_AUTHOR_NAME"
	PushAuthorEmailEnv = "AERIE_PUSH_AUTHOR_EMAIL"
	PushUsernameEnv    = "AERIE_PUSH_USERNAME"
	PushPasswordEnv    = "AERIE_PUSH_PASSWORD"
)

// OutcomePushFailed: the agent completed, but its work could not be
// committed or pushed (spec.workspace.git.push).
const OutcomePushFailed = "push_failed"

// Push asks the runner to have the work delivered once its agent
// completed: it connects to the git-push container at Socket.
type Push struct {
	Socket string `json:"socket"`
}

func (c *Config) validatePush() []error {
	if c.Push != nil && !path.IsAbs(c.Push.Socket) {
		return []error{fieldErr("push.socket", "%q: want an absolute path", c.Push.Socket)}
	}
	return nil
}

// PushReport is how the delivery went, in a Report.
type PushReport struct {
	Branch string `json:"branch"`
	// Commit is the commit pushed.
	Commit string `json:"commit,omitempty"`
	// NothingToPush: the workspace had no changes.
	NothingToPush bool `json:"nothingToPush,omitempty"`
	// Error says why the push failed (the Report's outcome is then
	// push_failed).
	Error string `json:"error,omitempty"`
}

// Message describes the delivery for people.
func (p *PushReport) Message() string {
	switch {
	case p.Error != "":
		return fmt.Sprintf("push to branch %s failed: %s", p.Branch, p.Error)
	case p.NothingToPush:
		return fmt.Sprintf("nothing to push to branch %s: the workspace has no changes", p.Branch)
	}
	return fmt.Sprintf("pushed commit %s to branch %s", p.Commit, p.Branch)
}
