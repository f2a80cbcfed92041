package controllers

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// Labels of the children of an AgentSession.
const (
	// LabelSession is the AgentSession's name (when it fits in a label).
	LabelSession = "aerie.run/session"
	// LabelSessionUID is the AgentSession's UID: how the controller finds
	// its children, whatever the name's length.
	LabelSessionUID = "aerie.run/session-uid"
	// LabelAttempt is the attempt a pod or runner ConfigMap belongs to.
	LabelAttempt = "aerie.run/attempt"
	// LabelLayerDigest marks a platform layer's mirror with the digest
	// (hex, without "sha256:") of its content.
	LabelLayerDigest = "aerie.run/layer-digest"

	labelName      = "app.kubernetes.io/name"
	labelComponent = "app.kubernetes.io/component"
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "aerie-controller"
)

// Container names of a runner pod.
const (
	ContainerAgent     = "agent"
	ContainerWorkspace = "workspace"
	ContainerGitClone  = "git-clone"
	ContainerGitPush   = "git-push"
)

// Volume names and mount paths of a runner pod.
const (
	volumeConfig       = "runner-config"
	volumeSocket       = "executor-socket"
	volumeWorkspace    = "workspace"
	volumeAgentTmp     = "agent-tmp"
	volumeWorkspaceTmp = "workspace-tmp"
	volumeGitSecret    = "git-credentials"
	volumeDelivery     = "delivery"
	volumePushTmp      = "git-push-tmp"
	tmpDir             = "/tmp"
	gitSecretDir       = "/etc/aerie/git"
)

// Every container of a runner pod has its own /tmp as its home and its
// temporary directory.
const (
	envHome   = "HOME"
	envTmpDir = "TMPDIR"
)

// deadlineSlack is added to the pod's activeDeadlineSeconds beyond the
// runner's own time budget and grace period: the runner should always stop
// itself, with its outcome reported, before the kubelet has to.
const deadlineSlack = 30 * time.Second

// defaultMaxAttempts is retry.maxAttempts when unset (the CRD's default).
const defaultMaxAttempts = 3

// childName is the name of attempt n's pod and runner ConfigMap:
// "<session>-<n>", shortened with a hash to fit a name's 253 characters.
func childName(session string, attempt int32) string {
	return withSuffix(session, "-"+strconv.Itoa(int(attempt)))
}

// trimName drops characters a name may not end with.
func trimName(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '-' || s[len(s)-1] == '.') {
		s = s[:len(s)-1]
	}
	return s
}

// resolvedLayer is one extension layer as the pod mounts it.
type resolvedLayer struct {
	// Name labels the layer in the runner's reports.
	Name string
	// Kind is runconfig.LayerSpec, LayerNamespace or LayerPlatform.
	Kind string
	// Digest is the content digest of a ConfigMap layer.
	Digest string
	// Source is the volume: a ConfigMap with its items (paths and modes),
	// a PVC or an image.
	Source corev1.VolumeSource
	// SubPath is the directory of the volume that is the layer.
	SubPath string
	// Origin names what holds the layer, for the runner's record:
	// runconfig.Layer's Source.
	Origin string
}

// attempt is what the children of one attempt are built from, besides
// the session and the controller's Config: what the reconciler resolved
// and decided. Building from it is pure.
type attempt struct {
	// Number counts the attempts from 1.
	Number int32
	// SessionID is the store's id of the session (see runconfig.Session).
	SessionID string
	// ResumeFrom and ForkFrom are resolved session ids; ForkAt is the
	// fork's sequence number.
	ResumeFrom, ForkFrom string
	ForkAt               int64
	// Prompt is the task, with promptFrom resolved.
	Prompt string
	// Result is spec.result's schema, resolved; nil without spec.result.
	Result *runconfig.ResultSchema
	// Layers are the mounted layers, nearest first.
	Layers []resolvedLayer
	// TrustPins are spec.trust.pinsFrom, resolved.
	TrustPins []runconfig.TrustPins
	// Remaining is what is left of budget.maxDuration for this attempt;
	// zero means no limit.
	Remaining time.Duration
	// Approvals are the decisions on the call the session paused on.
	Approvals []runconfig.Approval
	// Executors are the executor pods' addresses by name; nil without
	// spec.executors.
	Executors map[string]string
}

// runnerConfig is the runner configuration of an attempt.
func runnerConfig(s *aeriev1alpha1.AgentSession, a attempt) runconfig.Config {
	c := runconfig.Config{
		APIVersion:   runconfig.APIVersion,
		Kind:         runconfig.Kind,
		Namespace:    s.Namespace,
		AgentSession: s.Name,
		Session: runconfig.Session{
			ID: a.SessionID, Attempt: a.Number,
			ResumeFrom: a.ResumeFrom, ForkFrom: a.ForkFrom, ForkAtSequence: a.ForkAt,
		},
		Prompt: a.Prompt,
		Result: a.Result,
		Model: runconfig.Model{
			Provider: string(s.Spec.Model.Provider),
			Name:     s.Spec.Model.Name,
			BaseURL:  s.Spec.Model.BaseURL,
		},
		Push:         pushConfig(s),
		Memory:       memoryConfig(s),
		Toolset:      s.Spec.Toolset,
		Persona:      s.Spec.Persona,
		HookApproval: string(s.Spec.HookApproval),
		Approvals:    a.Approvals,
		Secrets:      secretNames(s),
		Executor: runconfig.Executor{
			Socket:    runconfig.DefaultSocket,
			Workspace: runconfig.DefaultWorkspace,
		},
		Budget: runconfig.Budget{MaxDuration: runconfig.Duration(a.Remaining)},
	}
	if len(s.Spec.Executors) > 0 {
		c.Executors = remoteExecutors(s, a.Executors)
	}
	if v := s.Spec.Model.ContextWindow; v != nil {
		c.Model.ContextWindow = *v
	}
	if v := s.Spec.Model.MaxOutputTokens; v != nil {
		c.Model.MaxOutputTokens = *v
	}
	if b := s.Spec.Budget; b != nil {
		if b.MaxTurns != nil {
			c.Budget.MaxTurns = *b.MaxTurns
		}
		if b.MaxTokens != nil {
			c.Budget.MaxTokens = *b.MaxTokens
		}
		if b.MaxCostUSD != nil {
			// The API's rule makes it a positive decimal.
			c.Budget.MaxCostUSD, _ = strconv.ParseFloat(*b.MaxCostUSD, 64)
		}
	}
	if w := s.Spec.Workspace; w != nil {
		c.Executor.WorkingDir = w.WorkingDir
	}
	for i, l := range a.Layers {
		c.Layers = append(c.Layers, runconfig.Layer{
			Name:   l.Name,
			Kind:   l.Kind,
			Dir:    runconfig.LayerDir(i),
			Digest: l.Digest,
			Source: l.Origin,
		})
	}
	if t := s.Spec.Trust; t != nil {
		for _, src := range t.Sources {
			c.Trust.Sources = append(c.Trust.Sources, string(src))
		}
	} else {
		c.Trust.Sources = []string{
			string(aeriev1alpha1.TrustFromExtensions),
			string(aeriev1alpha1.TrustFromNamespace),
			string(aeriev1alpha1.TrustFromPlatform),
		}
	}
	c.Trust.Pins = a.TrustPins
	return c
}

// childLabels are the labels of an attempt's pod and runner ConfigMap.
func childLabels(s *aeriev1alpha1.AgentSession, n int32) map[string]string {
	l := map[string]string{
		labelName:       "aerie-runner",
		labelComponent:  "runner",
		labelManagedBy:  managedBy,
		LabelSessionUID: string(s.UID),
		LabelAttempt:    strconv.Itoa(int(n)),
	}
	if len(validation.IsValidLabelValue(s.Name)) == 0 {
		l[LabelSession] = s.Name
	}
	return l
}

// ownerRef makes the session the controller of a child, so that the child
// is deleted with it and its changes wake the session's reconcile.
func ownerRef(s *aeriev1alpha1.AgentSession) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         aeriev1alpha1.GroupVersion.String(),
		Kind:               "AgentSession",
		Name:               s.Name,
		UID:                s.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// desiredConfigMap is the immutable ConfigMap that holds an attempt's
// runner configuration.
func desiredConfigMap(s *aeriev1alpha1.AgentSession, a attempt) (*corev1.ConfigMap, error) {
	rc := runnerConfig(s, a)
	data, err := rc.Marshal()
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            childName(s.Name, a.Number),
			Namespace:       s.Namespace,
			Labels:          childLabels(s, a.Number),
			OwnerReferences: []metav1.OwnerReference{ownerRef(s)},
		},
		Immutable: ptr.To(true),
		Data:      map[string]string{runconfig.FileName: string(data)},
	}, nil
}

// desiredPod is the runner pod of an attempt. The pod is never changed
// after it is created, so everything it needs is decided here.
//
// The workspace container is a native sidecar (an init container that
// restarts Always): it starts before the agent, the pod's phase follows the
// agent alone, and on deletion it is stopped only after the agent has
// exited, so the runner can still tear the tools down through it.
func desiredPod(cfg Config, s *aeriev1alpha1.AgentSession, a attempt) *corev1.Pod {
	name := childName(s.Name, a.Number)
	var runner aeriev1alpha1.RunnerSpec
	if s.Spec.Runner != nil {
		runner = *s.Spec.Runner
	}
	image := cfg.RunnerImage
	if runner.Image != "" {
		image = runner.Image
	}
	volumes, mounts := podVolumes(name, s.Spec.Workspace, a.Layers)
	var inits []corev1.Container
	if w := s.Spec.Workspace; w != nil && w.Git != nil {
		clone, vol := gitClone(cfg, image, w.Git, mounts.workspace)
		if vol != nil {
			volumes = append(volumes, *vol)
		}
		if w.Git.Push != nil {
			clone.Env = append(clone.Env, corev1.EnvVar{Name: "AERIE_BASE_FILE", Value: runconfig.DefaultBaseFile})
			clone.VolumeMounts = append(clone.VolumeMounts, deliveryMount)
			volumes = append(volumes, deliveryVolumes()...)
			inits = append(inits, clone, gitPush(cfg, s, image, mounts.workspace))
		} else {
			inits = append(inits, clone)
		}
	}
	inits = append(inits, workspaceContainer(cfg, image, runner, mounts))

	agent := agentContainer(cfg, s, image, mounts)
	if len(s.Spec.Executors) > 0 {
		volumes = append(volumes, corev1.Volume{Name: volumeCredential, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{
				SecretName: credentialsName(s.Name, a.Number),
				Items:      []corev1.KeyToPath{{Key: runnerCredentialKey, Path: runnerCredentialKey}},
				// The agent's user reads it through fsGroup; the
				// workspace container does not mount it.
				DefaultMode: ptr.To(int32(0o440)),
			},
		}})
		agent.VolumeMounts = append(agent.VolumeMounts, corev1.VolumeMount{
			Name: volumeCredential, MountPath: runnerCredentialDir, ReadOnly: true,
		})
	}
	if w := s.Spec.Workspace; w != nil && w.Git != nil && w.Git.Push != nil {
		agent.VolumeMounts = append(agent.VolumeMounts, deliveryMount)
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       s.Namespace,
			Labels:          childLabels(s, a.Number),
			OwnerReferences: []metav1.OwnerReference{ownerRef(s)},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			ServiceAccountName:            runner.ServiceAccountName,
			RuntimeClassName:              runner.RuntimeClassName,
			NodeSelector:                  runner.NodeSelector,
			Tolerations:                   runner.Tolerations,
			TerminationGracePeriodSeconds: ptr.To(int64(math.Ceil(cfg.TerminationGrace.Seconds()))),
			SecurityContext:               podSecurity(cfg),
			InitContainers:                inits,
			Containers:                    []corev1.Container{agent},
			Volumes:                       volumes,
		},
	}
	if a.Remaining > 0 {
		limit := a.Remaining + cfg.TerminationGrace + deadlineSlack
		pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(math.Ceil(limit.Seconds())))
	}
	return pod
}

// podMounts are the mounts both containers of a runner pod have: the
// workspace (read-write: the tools' mount), the executor socket's
// directory and the layers, read-only, nearest first.
type podMounts struct {
	workspace, socket corev1.VolumeMount
	layers            []corev1.VolumeMount
}

// podVolumes are the volumes of the runner pod name (all but a git
// clone's credentials): its runner configuration, the socket's directory,
// each container's /tmp, the workspace and the layers; and the mounts the
// containers share.
func podVolumes(name string, w *aeriev1alpha1.WorkspaceSpec, layers []resolvedLayer) ([]corev1.Volume, podMounts) {
	workspaceVolume, workspaceSubPath := workspaceSource(w)
	volumes := make([]corev1.Volume, 0, 5+len(layers))
	volumes = append(volumes,
		corev1.Volume{Name: volumeConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
			DefaultMode:          ptr.To(int32(runconfig.ModeFile)),
		}}},
		// The socket directory is memory-backed: it holds one socket.
		corev1.Volume{Name: volumeSocket, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium:    corev1.StorageMediumMemory,
			SizeLimit: ptr.To(resource.MustParse("1Mi")),
		}}},
		corev1.Volume{Name: volumeAgentTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: volumeWorkspaceTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: volumeWorkspace, VolumeSource: workspaceVolume},
	)
	m := podMounts{
		workspace: corev1.VolumeMount{
			Name:      volumeWorkspace,
			MountPath: runconfig.DefaultWorkspace,
			SubPath:   workspaceSubPath,
		},
		socket: corev1.VolumeMount{Name: volumeSocket, MountPath: runconfig.SocketDir},
	}
	for i, l := range layers {
		vname := fmt.Sprintf("layer-%d", i)
		volumes = append(volumes, corev1.Volume{Name: vname, VolumeSource: l.Source})
		mount := readOnlyMount(vname, runconfig.LayerDir(i))
		mount.SubPath = l.SubPath
		m.layers = append(m.layers, mount)
	}
	return volumes, m
}

func readOnlyMount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true}
}

// agentContainer runs the runner: the agent loop, which holds the model's
// API key and the database DSN, and reaches the tools only through the
// executor socket.
func agentContainer(cfg Config, s *aeriev1alpha1.AgentSession, image string, m podMounts) corev1.Container {
	// The agent reads the project's layers and AGENTS.md itself, through
	// an os.Root at the workspace (a link planted there cannot lead it to
	// its own secrets), and never writes: the tools do, in the workspace
	// container. Read-only, at the same path, so that a project tool's
	// path means the same file in both containers.
	workspace := m.workspace
	workspace.ReadOnly = true
	return corev1.Container{
		Name:            ContainerAgent,
		Image:           image,
		ImagePullPolicy: cfg.ImagePullPolicy,
		Command:         []string{cfg.RunnerCommand, "runner", "--config", runconfig.DefaultPath},
		Env:             agentEnv(cfg, s),
		Resources:       cfg.AgentResources,
		VolumeMounts: append([]corev1.VolumeMount{
			readOnlyMount(volumeConfig, runconfig.Dir),
			m.socket,
			{Name: volumeAgentTmp, MountPath: tmpDir},
			workspace,
		}, m.layers...),
		TerminationMessagePath: runconfig.DefaultTerminationLog,
		// A runner that died before writing its report leaves the tail
		// of its log for people; the controller ignores what is not a
		// report.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurity(cfg.AgentUser),
	}
}

// workspaceContainer runs the executor, where the tools run: as another
// user than the agent, with none of its secrets, and the spec's
// environment and resources.
func workspaceContainer(cfg Config, image string, runner aeriev1alpha1.RunnerSpec, m podMounts) corev1.Container {
	c := corev1.Container{
		Name:            ContainerWorkspace,
		Image:           image,
		ImagePullPolicy: cfg.ImagePullPolicy,
		Command:         executorServe(cfg.RunnerCommand, "--socket", runconfig.DefaultSocket),
		RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
		WorkingDir:      runconfig.DefaultWorkspace,
		Env: append([]corev1.EnvVar{
			{Name: envHome, Value: tmpDir},
			{Name: envTmpDir, Value: tmpDir},
		}, runner.Env...),
		VolumeMounts: append([]corev1.VolumeMount{
			m.workspace,
			m.socket,
			{Name: volumeWorkspaceTmp, MountPath: tmpDir},
		}, m.layers...),
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext:          containerSecurity(cfg.WorkspaceUser),
	}
	if runner.Resources != nil {
		c.Resources = *runner.Resources
	}
	return c
}

// podSecurity is the security context of every pod: the restricted
// profile, and the group that the containers share their volumes by.
func podSecurity(cfg Config) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		FSGroup:             ptr.To(cfg.FSGroup),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurity is the security context of every container: the
// restricted profile, with the container's own user.
func containerSecurity(uid int64) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser:                ptr.To(uid),
		RunAsGroup:               ptr.To(uid),
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// agentEnv is the agent container's environment: its two secrets and
// spec.secrets, by reference, and where to write. Only the agent container
// gets spec.secrets: the extensions' MCP clients run there, the tools do not.
func agentEnv(cfg Config, s *aeriev1alpha1.AgentSession) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: envHome, Value: tmpDir},
		{Name: envTmpDir, Value: tmpDir},
		{Name: "AERIE_HOME", Value: tmpDir + "/aerie"},
		{Name: runconfig.DatabaseURLEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: cfg.DatabaseSecret.Name},
			Key:                  cfg.DatabaseSecret.Key,
		}}},
	}
	if ref := s.Spec.Model.APIKeySecretRef; ref != nil {
		if name := runconfig.APIKeyEnv(string(s.Spec.Model.Provider)); name != "" {
			env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name},
				Key:                  ref.Key,
			}}})
		}
	}
	for _, sec := range s.Spec.Secrets {
		ref := &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: sec.SecretKeyRef.Name},
			Key:                  sec.SecretKeyRef.Key,
		}
		env = append(env, corev1.EnvVar{Name: sec.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}})
	}
	return env
}

// secretNames are the names of spec.secrets, sorted: the variables of the
// agent container that the runner may resolve ${NAME} from.
func secretNames(s *aeriev1alpha1.AgentSession) []string {
	names := make([]string, 0, len(s.Spec.Secrets))
	for _, sec := range s.Spec.Secrets {
		names = append(names, sec.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// workspaceSource is the workspace volume and the sub-path mounted from
// it: an emptyDir (also for git, which clones into it) or a PVC.
func workspaceSource(w *aeriev1alpha1.WorkspaceSpec) (corev1.VolumeSource, string) {
	switch {
	case w != nil && w.PersistentVolumeClaim != nil:
		claim := &corev1.PersistentVolumeClaimVolumeSource{ClaimName: w.PersistentVolumeClaim.ClaimName}
		return corev1.VolumeSource{PersistentVolumeClaim: claim}, w.PersistentVolumeClaim.SubPath
	case w != nil && w.EmptyDir != nil:
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: w.EmptyDir.SizeLimit}}, ""
	}
	return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, ""
}

// gitCloneScript clones $AERIE_GIT_URL at $AERIE_GIT_REF into the
// workspace. It is the same for every session: what varies comes in the
// environment, and the credentials come from the Secret (environment
// variables for HTTP, a mounted key for SSH) and are handed to git through
// GIT_ASKPASS and GIT_SSH_COMMAND, so they never appear in a command line,
// the spec or the log. Fetching the ref (rather than clone --branch) works
// for branches, tags and commits alike.
const gitCloneScript = `set -eu
umask 077
if [ -n "${GIT_PASSWORD:-}" ]; then
  cat > /tmp/git-askpass <<'EOF'
#!/bin/sh
case "$1" in
  Username*) printf '%s\n' "${GIT_USERNAME:-git}" ;;
  *) printf '%s\n' "$GIT_PASSWORD" ;;
esac
EOF
  chmod 0700 /tmp/git-askpass
  export GIT_ASKPASS=/tmp/git-askpass
fi
if [ -f ` + gitSecretDir + `/ssh-privatekey ]; then
  cp ` + gitSecretDir + `/ssh-privatekey /tmp/git-ssh-key
  chmod 0600 /tmp/git-ssh-key
  known=/dev/null; strict=accept-new
  if [ -f ` + gitSecretDir + `/known_hosts ]; then known=` + gitSecretDir + `/known_hosts; strict=yes; fi
  export GIT_SSH_COMMAND="ssh -i /tmp/git-ssh-key -o IdentitiesOnly=yes ` +
	`-o UserKnownHostsFile=$known -o StrictHostKeyChecking=$strict"
fi
trap 'rm -f /tmp/git-askpass /tmp/git-ssh-key' EXIT
umask 022
# The workspace root belongs to the volume, not to this user: without this,
# git refuses to work in it (here and in the tools, which share this HOME).
git config --global --add safe.directory /workspace
cd /workspace
git init -q .
git remote add origin "$AERIE_GIT_URL"
git fetch -q ${AERIE_GIT_DEPTH:+--depth "$AERIE_GIT_DEPTH"} origin "${AERIE_GIT_REF:-HEAD}"
git checkout -q FETCH_HEAD
if [ -n "${AERIE_BASE_FILE:-}" ]; then git rev-parse HEAD > "$AERIE_BASE_FILE"; fi
echo "cloned $AERIE_GIT_URL ${AERIE_GIT_REF:-HEAD} at $(git rev-parse HEAD)"
`

// gitClone is the init container that clones a git workspace, running as
// the workspace user so that the tools own the checkout, and the Secret
// volume it reads an SSH key from. It runs in cfg.GitImage, or else in
// image, the pod's runner image.
func gitClone(
	cfg Config, image string, g *aeriev1alpha1.GitWorkspace, workspace corev1.VolumeMount,
) (corev1.Container, *corev1.Volume) {
	env := []corev1.EnvVar{
		{Name: envHome, Value: tmpDir},
		{Name: "GIT_TERMINAL_PROMPT", Value: "0"},
		{Name: "AERIE_GIT_URL", Value: g.URL},
		{Name: "AERIE_GIT_REF", Value: g.Ref},
	}
	if g.Depth > 0 {
		env = append(env, corev1.EnvVar{Name: "AERIE_GIT_DEPTH", Value: strconv.Itoa(int(g.Depth))})
	}
	mounts := []corev1.VolumeMount{workspace, {Name: volumeWorkspaceTmp, MountPath: tmpDir}}
	var vol *corev1.Volume
	if g.SecretRef != nil {
		key := func(k string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: *g.SecretRef,
				Key:                  k,
				Optional:             ptr.To(true),
			}}
		}
		env = append(env,
			corev1.EnvVar{Name: "GIT_USERNAME", ValueFrom: key("username")},
			corev1.EnvVar{Name: "GIT_PASSWORD", ValueFrom: key("password")},
		)
		vol = &corev1.Volume{Name: volumeGitSecret, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: g.SecretRef.Name,
			Items: []corev1.KeyToPath{
				{Key: "ssh-privatekey", Path: "ssh-privatekey"},
				{Key: "known_hosts", Path: "known_hosts"},
			},
			// Group-readable: the volume belongs to fsGroup, and the
			// script copies the key to a private file for ssh.
			DefaultMode: ptr.To(int32(0o440)),
			Optional:    ptr.To(true),
		}}}
		mounts = append(mounts, corev1.VolumeMount{Name: volumeGitSecret, MountPath: gitSecretDir, ReadOnly: true})
	}
	pull := cfg.ImagePullPolicy
	if cfg.GitImage != "" {
		image, pull = cfg.GitImage, ""
	}
	return corev1.Container{
		Name:                     ContainerGitClone,
		Image:                    image,
		ImagePullPolicy:          pull,
		Command:                  []string{"sh", "-c", gitCloneScript},
		Env:                      env,
		VolumeMounts:             mounts,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurity(cfg.WorkspaceUser),
	}, vol
}

// maxAttempts is the session's retry.maxAttempts.
// retries is how many attempts were started after a lost pod: every one
// but the first and those that resumed after an approval.
func retries(s *aeriev1alpha1.AgentSession) int32 {
	return s.Status.Attempts - 1 - s.Status.ApprovalResumes
}

func maxAttempts(s *aeriev1alpha1.AgentSession) int32 {
	if s.Spec.Retry != nil && s.Spec.Retry.MaxAttempts > 0 {
		return s.Spec.Retry.MaxAttempts
	}
	return defaultMaxAttempts
}

// deliveryMount is the delivery volume in the containers that share it:
// git-clone records the cloned commit there, git-push serves its socket
// there and the agent connects to it. The workspace container, where the
// tools run, never mounts it.
var deliveryMount = corev1.VolumeMount{Name: volumeDelivery, MountPath: runconfig.DeliveryDir}

// deliveryVolumes are the volumes of spec.workspace.git.push: the delivery
// volume (memory-backed: a commit id and a socket) and git-push's /tmp.
func deliveryVolumes() []corev1.Volume {
	return []corev1.Volume{
		{Name: volumeDelivery, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium:    corev1.StorageMediumMemory,
			SizeLimit: ptr.To(resource.MustParse("1Mi")),
		}}},
		{Name: volumePushTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
}

// gitPush is the native sidecar that delivers the work when the runner
// asks (aerie git-push): the only container with the push credentials,
// which holds no model key. It reads the workspace's files, read-only, as
// the workspace user (the tools' files are theirs), and works in a bare
// repository of its own in its own /tmp.
func gitPush(cfg Config, s *aeriev1alpha1.AgentSession, image string, workspace corev1.VolumeMount) corev1.Container {
	g := s.Spec.Workspace.Git
	p := g.Push
	branch := p.Branch
	if branch == "" {
		branch = defaultPushBranch(s.Name)
	}
	message := p.CommitMessage
	if message == "" {
		message = fmt.Sprintf("aerie: work of session %s/%s", s.Namespace, s.Name)
	}
	name, email := "aerie", "aerie@localhost"
	if p.Author != nil {
		name, email = p.Author.Name, p.Author.Email
	}
	env := []corev1.EnvVar{
		{Name: envHome, Value: tmpDir},
		{Name: envTmpDir, Value: tmpDir},
		{Name: runconfig.PushURLEnv, Value: g.URL},
		{Name: runconfig.PushBranchEnv, Value: branch},
		{Name: runconfig.PushMessageEnv, Value: message},
		{Name: runconfig.PushAuthorNameEnv, Value: name},
		{Name: runconfig.PushAuthorEmailEnv, Value: email},
	}
	secret := p.SecretRef
	if secret == nil {
		secret = g.SecretRef
	}
	if secret != nil {
		key := func(k string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: *secret, Key: k, Optional: ptr.To(true),
			}}
		}
		env = append(env,
			corev1.EnvVar{Name: runconfig.PushUsernameEnv, ValueFrom: key("username")},
			corev1.EnvVar{Name: runconfig.PushPasswordEnv, ValueFrom: key("password")},
		)
	}
	ws := workspace
	ws.ReadOnly = true
	return corev1.Container{
		Name:            ContainerGitPush,
		Image:           image,
		ImagePullPolicy: cfg.ImagePullPolicy,
		Command: []string{
			cfg.RunnerCommand, "git-push",
			"--socket", runconfig.DefaultPushSocket,
			"--workspace", runconfig.DefaultWorkspace,
			"--base-file", runconfig.DefaultBaseFile,
		},
		RestartPolicy:            ptr.To(corev1.ContainerRestartPolicyAlways),
		Env:                      env,
		VolumeMounts:             []corev1.VolumeMount{ws, deliveryMount, {Name: volumePushTmp, MountPath: tmpDir}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurity(cfg.WorkspaceUser),
	}
}

// defaultPushBranch is spec.workspace.git.push.branch when unset.
func defaultPushBranch(session string) string { return "aerie/" + session }

// pushConfig is the runner's push configuration: set when the session
// delivers its work with spec.workspace.git.push.
// memoryConfig is where the session's memory is kept: spec.memory.scope,
// else the git workspace's URL, the same for https://host/repo and
// https://host/repo.git/; nil when spec.memory.disabled.
func memoryConfig(s *aeriev1alpha1.AgentSession) *runconfig.Memory {
	m := s.Spec.Memory
	if m != nil && m.Disabled {
		return nil
	}
	if m != nil && m.Scope != "" {
		return &runconfig.Memory{Scope: m.Scope}
	}
	if w := s.Spec.Workspace; w != nil && w.Git != nil {
		return &runconfig.Memory{Scope: strings.TrimSuffix(strings.TrimRight(w.Git.URL, "/"), ".git")}
	}
	return &runconfig.Memory{}
}

func pushConfig(s *aeriev1alpha1.AgentSession) *runconfig.Push {
	if w := s.Spec.Workspace; w == nil || w.Git == nil || w.Git.Push == nil {
		return nil
	}
	return &runconfig.Push{Socket: runconfig.DefaultPushSocket}
}
