package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/executor/mtls"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// An AgentSession's spec.executors run in pods of their own, one per
// executor and attempt, next to the runner pod: created before it (the
// runner configuration names their addresses, so they must have one),
// owned by the session, and deleted once the attempt's runner pod has
// ended. Each serves `aerie executor serve --listen` on its pod IP over
// TLS, with a credential made for the attempt: one Secret holds the
// runner's and every executor's, and each pod mounts only its own key.

// Names of an executor pod's parts.
const (
	// ContainerExecutor serves the executor protocol in an executor pod.
	ContainerExecutor = "executor"
	// ContainerAerieBin copies the aerie binary into an executor pod,
	// whose image need not have it.
	ContainerAerieBin = "aerie-bin"
	// LabelExecutor is an executor pod's executor name.
	LabelExecutor = "aerie.run/executor"

	componentRunner   = "runner"
	componentExecutor = "executor"

	volumeAerieBin          = "aerie-bin"
	volumeCredential        = "executor-credential"
	aerieBinDir             = "/aerie/bin"
	executorCredentialDir   = "/etc/aerie/executor"
	executorCredentialFile  = executorCredentialDir + "/executor.pem"
	runnerCredentialDir     = "/etc/aerie/executors"
	runnerCredentialKey     = mtls.RunnerName + ".pem"
	credentialValidityExtra = time.Hour
)

// executorServe is the command line of `aerie executor serve` at binary
// (the command is named as the executor container is),
// serving the workspace where the flags say.
func executorServe(binary string, where ...string) []string {
	return slices.Concat([]string{binary, ContainerExecutor, "serve"}, where,
		[]string{"--workspace", runconfig.DefaultWorkspace})
}

// withSuffix is session's name with suffix, shortened with a hash to fit
// a name's 253 characters.
func withSuffix(session, suffix string) string {
	if len(session)+len(suffix) <= validation.DNS1123SubdomainMaxLength {
		return session + suffix
	}
	sum := sha256.Sum256([]byte(session))
	h := "-" + hex.EncodeToString(sum[:4])
	return trimName(session[:validation.DNS1123SubdomainMaxLength-len(suffix)-len(h)]) + h + suffix
}

// executorPodName is the pod of executor exec in attempt n:
// "<session>-<n>-<exec>".
func executorPodName(session string, n int32, exec string) string {
	return withSuffix(session, "-"+strconv.Itoa(int(n))+"-"+exec)
}

// credentialsName is the Secret of attempt n's executor credentials.
func credentialsName(session string, n int32) string {
	return withSuffix(session, "-"+strconv.Itoa(int(n))+"-executor-credentials")
}

// executorCredentialKey is the key of an executor's credential in the
// attempt's Secret.
func executorCredentialKey(exec string) string { return exec + ".pem" }

// credentialValidity is how long an attempt's credentials are valid: the
// time the attempt may take, and an hour besides; a day without a limit.
func credentialValidity(a attempt) time.Duration {
	if a.Remaining > 0 {
		return a.Remaining + credentialValidityExtra
	}
	return 24 * time.Hour
}

// desiredCredentials is attempt a's Secret of credentials: the runner's
// and one per executor, from a set made for the attempt alone.
func desiredCredentials(s *aeriev1alpha1.AgentSession, a attempt) (*corev1.Secret, error) {
	names := make([]string, len(s.Spec.Executors))
	for i, e := range s.Spec.Executors {
		names[i] = e.Name
	}
	runner, execs, err := mtls.NewSet(names, credentialValidity(a))
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{runnerCredentialKey: runner.Marshal()}
	for name, c := range execs {
		data[executorCredentialKey(name)] = c.Marshal()
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            credentialsName(s.Name, a.Number),
			Namespace:       s.Namespace,
			Labels:          childLabels(s, a.Number),
			OwnerReferences: []metav1.OwnerReference{ownerRef(s)},
		},
		Immutable: ptr.To(true),
		Type:      corev1.SecretTypeOpaque,
		Data:      data,
	}, nil
}

// executorLabels are the labels of an executor pod.
func executorLabels(s *aeriev1alpha1.AgentSession, n int32, exec string) map[string]string {
	l := childLabels(s, n)
	l[labelName] = "aerie-executor"
	l[labelComponent] = componentExecutor
	l[LabelExecutor] = exec
	return l
}

// desiredExecutorPod is the pod of executor e in attempt a. Like the
// runner pod it is never changed after it is created, meets the restricted
// Pod Security profile, and has no service-account token and no secret
// but its own credential.
func desiredExecutorPod(
	cfg Config, s *aeriev1alpha1.AgentSession, a attempt, e aeriev1alpha1.ExecutorSpec,
) *corev1.Pod {
	workspaceVolume, subPath := workspaceSource(e.Workspace)
	workspace := corev1.VolumeMount{Name: volumeWorkspace, MountPath: runconfig.DefaultWorkspace, SubPath: subPath}
	bin := corev1.VolumeMount{Name: volumeAerieBin, MountPath: aerieBinDir}
	volumes := []corev1.Volume{
		{Name: volumeWorkspace, VolumeSource: workspaceVolume},
		{Name: volumeWorkspaceTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: volumeAerieBin, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: volumeCredential, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: credentialsName(s.Name, a.Number),
			Items:      []corev1.KeyToPath{{Key: executorCredentialKey(e.Name), Path: "executor.pem"}},
			// The executor's user reads it through fsGroup.
			DefaultMode: ptr.To(int32(0o440)),
		}}},
	}
	image := cfg.RunnerImage
	if r := s.Spec.Runner; r != nil && r.Image != "" {
		image = r.Image
	}
	inits := []corev1.Container{{
		Name:            ContainerAerieBin,
		Image:           image,
		ImagePullPolicy: cfg.ImagePullPolicy,
		Command:         []string{cfg.RunnerCommand, "executor", "install", aerieBinDir},
		VolumeMounts:    []corev1.VolumeMount{bin},
		SecurityContext: containerSecurity(cfg.WorkspaceUser),
	}}
	if w := e.Workspace; w != nil && w.Git != nil {
		clone, vol := gitClone(cfg, image, w.Git, workspace)
		if vol != nil {
			volumes = append(volumes, *vol)
		}
		inits = append(inits, clone)
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            executorPodName(s.Name, a.Number, e.Name),
			Namespace:       s.Namespace,
			Labels:          executorLabels(s, a.Number, e.Name),
			OwnerReferences: []metav1.OwnerReference{ownerRef(s)},
		},
		Spec: corev1.PodSpec{
			// A crashed executor is restarted at the same address; the
			// runner connects again.
			RestartPolicy:                 corev1.RestartPolicyOnFailure,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			RuntimeClassName:              e.RuntimeClassName,
			NodeSelector:                  e.NodeSelector,
			Tolerations:                   e.Tolerations,
			TerminationGracePeriodSeconds: ptr.To(int64(math.Ceil(cfg.TerminationGrace.Seconds()))),
			SecurityContext:               podSecurity(cfg),
			InitContainers:                inits,
			Containers:                    []corev1.Container{executorContainer(cfg, e, workspace, bin)},
			Volumes:                       volumes,
		},
	}
	if a.Remaining > 0 {
		limit := a.Remaining + cfg.TerminationGrace + deadlineSlack
		pod.Spec.ActiveDeadlineSeconds = ptr.To(int64(math.Ceil(limit.Seconds())))
	}
	return pod
}

// executorContainer serves the executor protocol from e's image, with the
// aerie binary the init container copied in.
func executorContainer(cfg Config, e aeriev1alpha1.ExecutorSpec, workspace, bin corev1.VolumeMount) corev1.Container {
	bin.ReadOnly = true
	security := containerSecurity(cfg.WorkspaceUser)
	// The image's toolchain may write where the image says (a GOPATH, a
	// cache under /usr/local): the pod holds no secret and ends with the
	// attempt.
	security.ReadOnlyRootFilesystem = ptr.To(false)
	c := corev1.Container{
		Name:            ContainerExecutor,
		Image:           e.Image,
		ImagePullPolicy: cfg.ImagePullPolicy,
		Command: executorServe(aerieBinDir+"/aerie",
			"--listen", "$(AERIE_POD_IP):"+strconv.Itoa(runconfig.ExecutorPort),
			"--credential", executorCredentialFile),
		WorkingDir: runconfig.DefaultWorkspace,
		Env: append([]corev1.EnvVar{
			{Name: "AERIE_POD_IP", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: envHome, Value: tmpDir},
			{Name: envTmpDir, Value: tmpDir},
		}, e.Env...),
		Ports: []corev1.ContainerPort{{Name: "executor", ContainerPort: runconfig.ExecutorPort}},
		VolumeMounts: []corev1.VolumeMount{
			workspace, bin,
			{Name: volumeWorkspaceTmp, MountPath: tmpDir},
			{Name: volumeCredential, MountPath: executorCredentialDir, ReadOnly: true},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          security,
	}
	if e.Resources != nil {
		c.Resources = *e.Resources
	}
	return c
}

// remoteExecutors are the runner configuration's executors: the executor
// pods at their addresses.
func remoteExecutors(s *aeriev1alpha1.AgentSession, ips map[string]string) []runconfig.RemoteExecutor {
	out := make([]runconfig.RemoteExecutor, 0, len(s.Spec.Executors))
	for _, e := range s.Spec.Executors {
		r := runconfig.RemoteExecutor{
			Name:       e.Name,
			Address:    net.JoinHostPort(ips[e.Name], strconv.Itoa(runconfig.ExecutorPort)),
			Default:    e.Default,
			Credential: runconfig.DefaultExecutorCredential,
			Workspace:  runconfig.DefaultWorkspace,
		}
		out = append(out, r)
	}
	return out
}

// isExecutorPod reports whether pod is an executor pod rather than a
// runner pod.
func isExecutorPod(pod *corev1.Pod) bool {
	return pod.Labels[labelComponent] == componentExecutor
}

// prepareExecutors makes attempt a's credentials and executor pods, and
// returns their IPs once every pod has one; "waiting" says which it is
// still waiting for.
func (r *AgentSessionReconciler) prepareExecutors(
	ctx context.Context, sc *scope, a attempt,
) (ips map[string]string, waiting string, err error) {
	s := sc.session
	if err := r.ensureCredentials(ctx, s, a); err != nil {
		return nil, "", err
	}
	ips = make(map[string]string, len(s.Spec.Executors))
	var pending []string
	for _, e := range s.Spec.Executors {
		pod := sc.executorPod(a.Number, e.Name)
		if pod == nil {
			pod = desiredExecutorPod(r.Config, s, a, e)
			if err := r.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, "", fmt.Errorf("create executor pod %s: %w", pod.Name, err)
			}
			sc.executors = append(sc.executors, pod)
		}
		if pod.Status.PodIP == "" {
			pending = append(pending, e.Name)
			continue
		}
		ips[e.Name] = pod.Status.PodIP
	}
	if len(pending) > 0 {
		return nil, "waiting for the executor pods of " + strings.Join(pending, ", ") + " to get an address", nil
	}
	return ips, "", nil
}

// ensureCredentials creates attempt a's Secret of credentials, once: an
// existing one (a reconcile that stopped half-way) stands, since its
// executor pods may already hold their keys.
func (r *AgentSessionReconciler) ensureCredentials(
	ctx context.Context, s *aeriev1alpha1.AgentSession, a attempt,
) error {
	name := types.NamespacedName{Namespace: s.Namespace, Name: credentialsName(s.Name, a.Number)}
	var existing corev1.Secret
	err := r.Reader.Get(ctx, name, &existing)
	switch {
	case err == nil && metav1.IsControlledBy(&existing, s):
		return nil
	case err == nil:
		return fmt.Errorf("secret %s exists and does not belong to the session; delete or rename it", name.Name)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get executor credentials %s: %w", name.Name, err)
	}
	secret, err := desiredCredentials(s, a)
	if err != nil {
		return err
	}
	if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create executor credentials %s: %w", secret.Name, err)
	}
	return nil
}

// executorPod is the executor pod of exec in attempt n, or nil.
func (sc *scope) executorPod(n int32, exec string) *corev1.Pod {
	for _, p := range sc.executors {
		if p.Labels[LabelAttempt] == strconv.Itoa(int(n)) && p.Labels[LabelExecutor] == exec {
			return p
		}
	}
	return nil
}

// liveAttempt is the attempt whose executor pods are to be kept: the one
// being prepared, or the current one while its runner pod is pending or
// running; 0 when none.
func (sc *scope) liveAttempt() int32 {
	if sc.preparing > 0 {
		return sc.preparing
	}
	if sc.session.Status.Phase.Finished() || sc.pod == nil {
		return 0
	}
	switch sc.observed.pod.State {
	case podPending, podRunning:
		return sc.session.Status.Attempts
	}
	return 0
}

// sweepExecutors deletes the executor pods of every attempt but the live
// one: an attempt's executors end with its runner pod.
func (r *AgentSessionReconciler) sweepExecutors(ctx context.Context, sc *scope) error {
	live := strconv.Itoa(int(sc.liveAttempt()))
	for _, p := range sc.executors {
		if p.Labels[LabelAttempt] == live || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete executor pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// executorStatuses are the executors of the live attempt, in spec order.
func (sc *scope) executorStatuses() []aeriev1alpha1.ExecutorStatus {
	n := sc.liveAttempt()
	if n == 0 {
		return sc.session.Status.Executors
	}
	out := make([]aeriev1alpha1.ExecutorStatus, 0, len(sc.session.Spec.Executors))
	for _, e := range sc.session.Spec.Executors {
		st := aeriev1alpha1.ExecutorStatus{Name: e.Name, PodName: executorPodName(sc.session.Name, n, e.Name)}
		switch p := sc.executorPod(n, e.Name); {
		case p == nil || !p.DeletionTimestamp.IsZero():
			st.Phase, st.Message = "Lost", "the executor pod is gone: calls to "+e.Name+" fail until the next attempt"
		default:
			st.Phase = string(p.Status.Phase)
			if st.Phase == "" {
				st.Phase = string(corev1.PodPending)
			}
			st.Message = executorMessage(p)
		}
		out = append(out, st)
	}
	return out
}

// startingReasons are the waiting reasons of a container on its way.
var startingReasons = []string{"", "PodInitializing", "ContainerCreating"}

// executorMessage says why an executor pod is not serving, or "".
func executorMessage(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodRunning {
		if c := containerStatus(p.Status.ContainerStatuses, ContainerExecutor); c != nil && c.Ready {
			return ""
		}
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil && !slices.Contains(startingReasons, w.Reason) {
			return cs.Name + ": " + w.Reason + ": " + w.Message
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("%s exited %d: %s", cs.Name, t.ExitCode, strings.TrimSpace(t.Message))
		}
	}
	return p.Status.Message
}
