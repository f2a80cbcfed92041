package testenv

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// expandVars expands the $(NAME) references of s with lookup, as the
// kubelet expands env values, commands and args: $$ is a literal $ (so
// $$(NAME) stays $(NAME)), a reference to an unknown name and an
// unterminated $( are kept as written, and any other $ is itself.
func expandVars(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envList is an environment in the order variables were first defined; a
// later definition replaces the value in place.
type envList struct {
	names  []string
	values map[string]string
}

func newEnvList() *envList { return &envList{values: make(map[string]string)} }

func (e *envList) set(name, value string) {
	if _, ok := e.values[name]; !ok {
		e.names = append(e.names, name)
	}
	e.values[name] = value
}

func (e *envList) lookup(name string) (string, bool) {
	v, ok := e.values[name]
	return v, ok
}

// environ returns NAME=value pairs.
func (e *envList) environ() []string {
	out := make([]string, 0, len(e.names))
	for _, n := range e.names {
		out = append(out, n+"="+e.values[n])
	}
	return out
}

// containerEnv resolves the environment the pod spec gives container c:
// envFrom sources in order, then env entries in order, each value expanded
// with the variables defined before it. A missing ConfigMap, Secret or key
// that is not optional is an error, which the kubelet reports as
// CreateContainerConfigError and retries.
func (w *podWorker) containerEnv(ctx context.Context, c *corev1.Container) (*envList, error) {
	env := newEnvList()
	for i, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := w.configMap(ctx, from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
			if err != nil {
				return nil, err
			}
			if cm != nil {
				data = cm.Data
			}
		case from.SecretRef != nil:
			s, err := w.secret(ctx, from.SecretRef.Name, from.SecretRef.Optional)
			if err != nil {
				return nil, err
			}
			if s != nil {
				data = make(map[string]string, len(s.Data))
				for k, v := range s.Data {
					data[k] = string(v)
				}
			}
		default:
			return nil, fmt.Errorf("container %s: envFrom[%d] has neither configMapRef nor secretRef", c.Name, i)
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			name := from.Prefix + k
			if name == "" || strings.Contains(name, "=") {
				continue // the kubelet skips keys that are not variable names
			}
			env.set(name, data[k])
		}
	}
	for _, ev := range c.Env {
		if ev.ValueFrom == nil {
			env.set(ev.Name, expandVars(ev.Value, env.lookup))
			continue
		}
		v, ok, err := w.envValueFrom(ctx, c, ev.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", ev.Name, err)
		}
		if ok {
			env.set(ev.Name, v)
		}
	}
	return env, nil
}

// envValueFrom resolves a valueFrom; ok is false for an optional reference
// to something missing, which leaves the variable unset.
func (w *podWorker) envValueFrom(ctx context.Context, c *corev1.Container, from *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := w.configMap(ctx, ref.Name, ref.Optional)
		if err != nil || cm == nil {
			return "", false, err
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if v, ok := cm.BinaryData[ref.Key]; ok {
			return string(v), true, nil
		}
		if isOptional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, w.namespace, ref.Name)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := w.secret(ctx, ref.Name, ref.Optional)
		if err != nil || s == nil {
			return "", false, err
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if isOptional(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, w.namespace, ref.Name)
	case from.FieldRef != nil:
		v, err := podFieldValue(w.pod, from.FieldRef.FieldPath)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := resourceFieldValue(w.pod, c.Name, from.ResourceFieldRef, w.r.capacity)
		return v, err == nil, err
	default:
		return "", false, fmt.Errorf("valueFrom names no source the local pod runner knows (fileKeyRef is not supported)")
	}
}

func isOptional(b *bool) bool { return b != nil && *b }

// configMap fetches a ConfigMap of the pod's namespace; nil without error
// when it is missing and optional.
func (w *podWorker) configMap(ctx context.Context, name string, optional *bool) (*corev1.ConfigMap, error) {
	cm, err := w.r.cs.CoreV1().ConfigMaps(w.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && isOptional(optional):
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("configmap %q not found", name)
	case err != nil:
		return nil, fmt.Errorf("get configmap %q: %w", name, err)
	}
	return cm, nil
}

// secret fetches a Secret of the pod's namespace; nil without error when
// it is missing and optional.
func (w *podWorker) secret(ctx context.Context, name string, optional *bool) (*corev1.Secret, error) {
	s, err := w.r.cs.CoreV1().Secrets(w.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && isOptional(optional):
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("secret %q not found", name)
	case err != nil:
		return nil, fmt.Errorf("get secret %q: %w", name, err)
	}
	return s, nil
}

// podFieldValue resolves a downward API fieldRef.
func podFieldValue(pod *corev1.Pod, path string) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return nodeIP, nil
	case "status.podIP", "status.podIPs":
		return podIP(pod), nil
	}
	return "", fmt.Errorf("fieldRef %q is not a field the downward API offers", path)
}

// subscript parses prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// formatMap renders labels or annotations as the downward API does: one
// key="value" per line, sorted by key.
func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceFieldValue resolves a downward API resourceFieldRef: a limit
// that is not set is the node's allocatable amount, as on a kubelet.
func resourceFieldValue(pod *corev1.Pod, defaultContainer string, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	name := ref.ContainerName
	if name == "" {
		name = defaultContainer
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			c = &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			c = &pod.Spec.InitContainers[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef names container %q, which the pod does not have", name)
	}
	kind, res, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef %q is not limits.<resource> or requests.<resource>", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(res)]
	if !ok && kind == "limits" {
		q, ok = allocatable[corev1.ResourceName(res)]
	}
	if !ok {
		q = resource.Quantity{}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if res == string(corev1.ResourceCPU) {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}

// podIP is a pod's address: a loopback address of its own, 127.x.y.z from
// its UID, so that two pods can serve the same port. The pods of the
// local runner still share the host's network namespace: anything on the
// host reaches any of them, as on a node without a NetworkPolicy.
func podIP(pod *corev1.Pod) string {
	sum := sha256.Sum256([]byte(pod.UID))
	return fmt.Sprintf("127.%d.%d.%d", 1+int(sum[0])%254, sum[1], 1+int(sum[2])%254)
}
