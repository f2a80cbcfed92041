package controllers

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Config is the controller's configuration: what every runner pod shares,
// whatever its AgentSession says.
type Config struct {
	// Namespace is the controller's own namespace, where platform layers
	// (ConfigMaps labelled aerie.run/layer) are found.
	Namespace string
	// RunnerImage runs both containers of a runner pod (spec.runner.image
	// overrides it per session).
	RunnerImage string
	// ImagePullPolicy applies to the runner image; empty is Kubernetes'
	// default.
	ImagePullPolicy corev1.PullPolicy
	// RunnerCommand is the aerie binary in the runner image.
	RunnerCommand string
	// GitImage clones git workspaces: any image with sh and git. Empty
	// clones with the pod's runner image, which has both: no other image
	// to pull, trust or mirror.
	GitImage string
	// DatabaseSecret names the Secret key, in each session's namespace,
	// that holds the session store's DSN. Only the agent container gets
	// it. A Secret per namespace rather than one the controller copies
	// around: the controller never reads it, and each namespace can have
	// database credentials of its own.
	DatabaseSecret SecretKey
	// AgentUser and WorkspaceUser are the UIDs (and primary GIDs) of the
	// two containers; FSGroup is the group they share, which owns the
	// executor socket's directory and the workspace volume.
	AgentUser, WorkspaceUser, FSGroup int64
	// AgentResources are the agent container's resources (the workspace
	// container's come from the spec).
	AgentResources corev1.ResourceRequirements
	// TerminationGrace is the runner pod's terminationGracePeriodSeconds:
	// the time from SIGTERM to SIGKILL in which the runner stops the loop,
	// tears down every process group and drains the journal.
	TerminationGrace time.Duration
}

// SecretKey names one key of a Secret.
type SecretKey struct {
	Name, Key string
}

// Defaults of Config.
const (
	DefaultRunnerCommand    = "/usr/local/bin/aerie"
	DefaultAgentUser        = 10001
	DefaultWorkspaceUser    = 10002
	DefaultFSGroup          = 10000
	DefaultTerminationGrace = 30 * time.Second
	DefaultDatabaseSecret   = "aerie-database"
	DefaultDatabaseKey      = "url"
	// DefaultMaxConcurrentReconciles is how many AgentSessions the
	// controller reconciles in parallel unless told otherwise. A reconcile
	// spends its time waiting for the API server (starting a session is
	// about five round trips in a row), so workers are cheap; 12 rather
	// than 4 got a burst of 300 sessions to their pods sooner in each of
	// three paired runs of hack/loadbench.
	DefaultMaxConcurrentReconciles = 12
)

// DefaultConfig returns a Config with every default filled in, for the
// controller running in namespace with the runner image.
func DefaultConfig(namespace, image string) Config {
	return Config{
		Namespace:        namespace,
		RunnerImage:      image,
		RunnerCommand:    DefaultRunnerCommand,
		DatabaseSecret:   SecretKey{Name: DefaultDatabaseSecret, Key: DefaultDatabaseKey},
		AgentUser:        DefaultAgentUser,
		WorkspaceUser:    DefaultWorkspaceUser,
		FSGroup:          DefaultFSGroup,
		TerminationGrace: DefaultTerminationGrace,
		AgentResources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("128Mi"),
			},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
	}
}

// Validate checks that the configuration can build pods that pass the Pod
// Security "restricted" profile.
func (c Config) Validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("the controller's namespace is empty: set --namespace or POD_NAMESPACE"))
	}
	if c.RunnerImage == "" {
		errs = append(errs, errors.New("no runner image: set --runner-image"))
	}
	if c.RunnerCommand == "" {
		errs = append(errs, errors.New("no runner command: set --runner-command"))
	}
	if c.DatabaseSecret.Name == "" || c.DatabaseSecret.Key == "" {
		errs = append(errs, errors.New("no database Secret: set --database-secret NAME and --database-secret-key KEY"))
	}
	ids := map[string]int64{"agent user": c.AgentUser, "workspace user": c.WorkspaceUser, "fs group": c.FSGroup}
	for name, id := range ids {
		if id <= 0 {
			errs = append(errs, fmt.Errorf("%s %d: want a non-root id above 0", name, id))
		}
	}
	if c.AgentUser == c.WorkspaceUser {
		errs = append(errs, fmt.Errorf(
			"agent and workspace users are both %d: the tools must not run as the user that holds the secrets",
			c.AgentUser))
	}
	if c.TerminationGrace < time.Second {
		errs = append(errs, fmt.Errorf("termination grace %s: want at least 1s for the runner's teardown",
			c.TerminationGrace))
	}
	return errors.Join(errs...)
}
