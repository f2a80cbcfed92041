package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// referenceError is a reference of the spec that cannot be resolved: a
// missing ConfigMap, Secret, key or session, or a malformed layer. It fails
// the session with InvalidReference; other errors are retried.
type referenceError struct{ msg string }

func (e *referenceError) Error() string { return e.msg }

func refErrorf(format string, args ...any) error {
	return &referenceError{msg: fmt.Sprintf(format, args...)}
}

// resolver gathers what an attempt is built from. It reads through reader,
// which does not cache: the ConfigMaps and Secrets it reads belong to the
// users, and caching every one of the cluster's would cost the controller
// memory and broad list rights for objects read once per attempt.
type resolver struct {
	reader client.Reader
	// apply writes a platform layer's mirror (server-side apply).
	apply func(ctx context.Context, cm *corev1.ConfigMap) error
	// own adds an owner reference to a mirror, keeping the others.
	own func(ctx context.Context, cm *corev1.ConfigMap, owner metav1.OwnerReference) error
	cfg Config
	// present holds the Secret keys found lately; now is the time of
	// the reconcile.
	present *presence
	now     time.Time
}

// resolve gathers attempt n of session s at now. The reads are independent
// and each costs a round trip to the API server, so they run at once: a
// session starts after the slowest of them rather than after their sum.
// The first error in the order the spec lists the fields is the one
// returned, as if they had been read one after the other.
func (r *resolver) resolve(
	ctx context.Context, s *aeriev1alpha1.AgentSession, n int32, now time.Time,
) (attempt, error) {
	a := attempt{Number: n}
	err := all(
		func() (err error) {
			a.Prompt, err = r.prompt(ctx, s, n)
			return err
		},
		func() error { return r.secrets(ctx, s) },
		func() (err error) {
			a.Result, err = r.resultSchema(ctx, s, n)
			return err
		},
		func() (err error) {
			if n > 1 && s.Spec.ResumeFrom != "" && s.Status.SessionID != "" {
				// Resolved by the first attempt: the session it resumed
				// is the one to go on with, even if the AgentSession
				// named is gone.
				a.ResumeFrom = s.Status.SessionID
				return nil
			}
			a.ResumeFrom, err = r.sessionRef(ctx, s.Namespace, "resumeFrom", s.Spec.ResumeFrom)
			return err
		},
		func() (err error) {
			f := s.Spec.ForkFrom
			if f == nil {
				return nil
			}
			if a.ForkFrom, err = r.sessionRef(ctx, s.Namespace, "forkFrom.session", f.Session); err != nil {
				return err
			}
			if f.AtSequence != nil {
				a.ForkAt = *f.AtSequence
			}
			return nil
		},
		func() (err error) {
			a.Layers, err = r.layers(ctx, s)
			return err
		},
		func() (err error) {
			a.TrustPins, err = r.trustPins(ctx, s)
			return err
		},
	)
	if err != nil {
		return a, err
	}
	switch {
	case n > 1 && s.Status.SessionID != "":
		a.SessionID = s.Status.SessionID
	case a.ResumeFrom != "":
		a.SessionID = a.ResumeFrom
	default:
		a.SessionID = string(s.UID)
	}
	a.Remaining = remaining(s, now)
	return a, nil
}

// all runs fs at once and returns the first error in their order, once
// every one has returned. Each f writes only variables of its own.
func all(fs ...func() error) error {
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// remaining is what is left of the session's maxDuration at now (all
// attempts together), zero when there is no limit.
func remaining(s *aeriev1alpha1.AgentSession, now time.Time) time.Duration {
	if s.Spec.Budget == nil || s.Spec.Budget.MaxDuration == nil {
		return 0
	}
	left := s.Spec.Budget.MaxDuration.Duration
	if st := s.Status.StartTime; st != nil {
		left -= now.Sub(st.Time)
	}
	return max(left, time.Second)
}

// prompt is the task: spec.prompt, or promptFrom read now for the first
// attempt, or the first attempt's for later ones, so that a change of the
// source does not change a running session.
func (r *resolver) prompt(ctx context.Context, s *aeriev1alpha1.AgentSession, n int32) (string, error) {
	if s.Spec.Prompt != "" || s.Spec.PromptFrom == nil {
		return s.Spec.Prompt, nil
	}
	if n > 1 {
		var cm corev1.ConfigMap
		err := r.reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: childName(s.Name, 1)}, &cm)
		if err == nil {
			if rc, perr := runconfig.Parse([]byte(cm.Data[runconfig.FileName])); perr == nil {
				return rc.Prompt, nil
			}
		} else if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("get the first attempt's runner config: %w", err)
		}
	}
	pf := s.Spec.PromptFrom
	var (
		value string
		err   error
	)
	switch {
	case pf.ConfigMapKeyRef != nil:
		value, err = r.configMapKey(ctx, s.Namespace, "promptFrom.configMapKeyRef", *pf.ConfigMapKeyRef)
	case pf.SecretKeyRef != nil:
		value, err = r.secretKey(ctx, s.Namespace, "promptFrom.secretKeyRef", *pf.SecretKeyRef)
	}
	if err != nil {
		return "", err
	}
	if value == "" {
		return "", refErrorf("promptFrom: the key is empty")
	}
	return value, nil
}

// resultSchema is spec.result's JSON Schema: the inline one, or
// schemaFrom read now for the first attempt and the first attempt's for
// later ones, as the prompt is. The runner compiles it: a schema it
// cannot use fails the session with the reason.
func (r *resolver) resultSchema(
	ctx context.Context, s *aeriev1alpha1.AgentSession, n int32,
) (*runconfig.ResultSchema, error) {
	res := s.Spec.Result
	switch {
	case res == nil:
		return nil, nil
	case res.Schema != nil:
		return &runconfig.ResultSchema{Source: "spec.result.schema", Schema: string(res.Schema.Raw)}, nil
	case res.SchemaFrom == nil:
		return nil, refErrorf("spec.result: set schema or schemaFrom")
	}
	if n > 1 {
		var cm corev1.ConfigMap
		err := r.reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: childName(s.Name, 1)}, &cm)
		if err == nil {
			if rc, perr := runconfig.Parse([]byte(cm.Data[runconfig.FileName])); perr == nil && rc.Result != nil {
				return rc.Result, nil
			}
		} else if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get the first attempt's runner config: %w", err)
		}
	}
	ref := res.SchemaFrom.ConfigMapKeyRef
	value, err := r.configMapKey(ctx, s.Namespace, "result.schemaFrom.configMapKeyRef", ref)
	if err != nil {
		return nil, err
	}
	return &runconfig.ResultSchema{
		Source: fmt.Sprintf("spec.result.schemaFrom (configmap/%s/%s)", ref.Name, ref.Key), Schema: value,
	}, nil
}

func (r *resolver) configMapKey(ctx context.Context, ns, field string, ref aeriev1alpha1.KeyReference) (string, error) {
	var cm corev1.ConfigMap
	if err := r.get(ctx, ns, ref.Name, &cm, field+": ConfigMap"); err != nil {
		return "", err
	}
	if v, ok := cm.Data[ref.Key]; ok {
		return v, nil
	}
	if v, ok := cm.BinaryData[ref.Key]; ok {
		return string(v), nil
	}
	return "", refErrorf("%s: ConfigMap %s/%s has no key %q", field, ns, ref.Name, ref.Key)
}

func (r *resolver) secretKey(ctx context.Context, ns, field string, ref aeriev1alpha1.KeyReference) (string, error) {
	var sec corev1.Secret
	if err := r.get(ctx, ns, ref.Name, &sec, field+": Secret"); err != nil {
		return "", err
	}
	v, ok := sec.Data[ref.Key]
	if !ok {
		return "", refErrorf("%s: Secret %s/%s has no key %q", field, ns, ref.Name, ref.Key)
	}
	return string(v), nil
}

// get reads an object; not finding it is a reference error described by
// what.
func (r *resolver) get(ctx context.Context, ns, name string, obj client.Object, what string) error {
	err := r.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return refErrorf("%s %s/%s not found", what, ns, name)
	case err != nil:
		return fmt.Errorf("get %s %s/%s: %w", what, ns, name, err)
	}
	return nil
}

// secrets checks that the Secret keys the pod's environment references
// exist, so that a missing one fails the session at once with its name
// instead of leaving the pod waiting in CreateContainerConfigError.
func (r *resolver) secrets(ctx context.Context, s *aeriev1alpha1.AgentSession) error {
	check := func(field string, ref aeriev1alpha1.KeyReference) func() error {
		return func() error {
			k := keyRef{namespace: s.Namespace, name: ref.Name, key: ref.Key}
			if r.present.found(k, r.now) {
				return nil
			}
			if _, err := r.secretKey(ctx, s.Namespace, field, ref); err != nil {
				return err
			}
			r.present.remember(k, r.now)
			return nil
		}
	}
	checks := []func() error{}
	if ref := s.Spec.Model.APIKeySecretRef; ref != nil {
		checks = append(checks, check("model.apiKeySecretRef", *ref))
	}
	for i, sec := range s.Spec.Secrets {
		checks = append(checks, check(fmt.Sprintf("secrets[%d].secretKeyRef (%s)", i, sec.Name), sec.SecretKeyRef))
	}
	db := aeriev1alpha1.KeyReference{Name: r.cfg.DatabaseSecret.Name, Key: r.cfg.DatabaseSecret.Key}
	checks = append(checks, check("the session store's Secret (the controller's --database-secret)", db))
	return all(checks...)
}

// sessionRef resolves a session reference: a UUID as is, or the name of an
// AgentSession in ns, whose session id it takes.
func (r *resolver) sessionRef(ctx context.Context, ns, field, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	if id, err := uuid.Parse(ref); err == nil {
		return id.String(), nil
	}
	var src aeriev1alpha1.AgentSession
	if err := r.get(ctx, ns, ref, &src, field+": AgentSession"); err != nil {
		return "", err
	}
	if src.Status.SessionID == "" {
		return "", refErrorf("%s: AgentSession %s/%s has not started a session yet", field, ns, ref)
	}
	return src.Status.SessionID, nil
}

// layers are the attempt's layers, nearest first: spec.extensions, the
// namespace's labelled ConfigMaps, then the platform's, mirrored. The
// ConfigMaps are read at once, then taken in that order.
func (r *resolver) layers(ctx context.Context, s *aeriev1alpha1.AgentSession) ([]resolvedLayer, error) {
	specCMs := make([]corev1.ConfigMap, len(s.Spec.Extensions))
	var nsLayers, platform []corev1.ConfigMap
	// The spec's references first: a missing one is the session's error
	// even when a list fails too.
	var reads []func() error
	for i, l := range s.Spec.Extensions {
		if l.ConfigMap == nil {
			continue
		}
		reads = append(reads, func() error {
			return r.get(ctx, s.Namespace, l.ConfigMap.Name, &specCMs[i], fmt.Sprintf("extensions[%d].configMap: ConfigMap", i))
		})
	}
	reads = append(reads,
		func() (err error) {
			nsLayers, err = r.labelled(ctx, s.Namespace)
			return err
		},
		func() (err error) {
			platform, err = r.labelled(ctx, r.cfg.Namespace)
			return err
		},
	)
	if err := all(reads...); err != nil {
		return nil, err
	}

	var out []resolvedLayer
	for i, l := range s.Spec.Extensions {
		if l.ConfigMap == nil {
			out = append(out, volumeLayer(l))
			continue
		}
		rl, err := r.mirrored(ctx, s, &specCMs[i], specLayerName(l), runconfig.LayerSpec)
		if err != nil {
			return nil, prefixReference(err, fmt.Sprintf("extensions[%d]: ", i))
		}
		out = append(out, rl)
	}
	for i := range nsLayers {
		rl, err := r.mirrored(ctx, s, &nsLayers[i], nsLayers[i].Name, runconfig.LayerNamespace)
		if err != nil {
			return nil, prefixReference(err, "namespace ")
		}
		out = append(out, rl)
	}
	for i := range platform {
		rl, err := r.mirrored(ctx, s, &platform[i], platform[i].Name, runconfig.LayerPlatform)
		if err != nil {
			return nil, err
		}
		out = append(out, rl)
	}
	return out, nil
}

// mirrored is ConfigMap layer src as the session mounts it: an immutable,
// content-addressed copy in the session's namespace (desiredMirror), which
// the session owns beside every other session that mounts it. A session
// sees its layers as they were when its attempt started, whatever happens
// to src meanwhile: the kubelet would otherwise swap a changed ConfigMap's
// files under the running agent, behind the digests it recorded.
func (r *resolver) mirrored(
	ctx context.Context, s *aeriev1alpha1.AgentSession, src *corev1.ConfigMap, name, kind string,
) (resolvedLayer, error) {
	files, err := runconfig.LayerFiles(src.Data, src.BinaryData, src.Annotations)
	if err != nil {
		what := "layer ConfigMap"
		if kind == runconfig.LayerPlatform {
			what = "platform " + what
		}
		return resolvedLayer{}, &referenceError{msg: fmt.Sprintf("%s %s/%s: %v", what, src.Namespace, src.Name, err)}
	}
	mirror := desiredMirror(src, s.Namespace, kind, runconfig.LayerDigest(files))
	if err := r.apply(ctx, mirror); err != nil {
		return resolvedLayer{}, fmt.Errorf("mirror %s layer %s/%s into namespace %s: %w",
			kind, src.Namespace, src.Name, s.Namespace, err)
	}
	// Every session that mounts the mirror owns it, so that Kubernetes'
	// garbage collector deletes it once the last of them is gone, and not
	// before.
	if !slices.ContainsFunc(mirror.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == s.UID }) {
		if err := r.own(ctx, mirror, mirrorOwner(s)); err != nil {
			return resolvedLayer{}, fmt.Errorf("own layer mirror %s/%s: %w", mirror.Namespace, mirror.Name, err)
		}
	}
	rl, err := configMapLayer(name, kind, mirror)
	if err != nil {
		return resolvedLayer{}, fmt.Errorf("layer mirror %s: %w", mirror.Name, err)
	}
	rl.Origin += " from configmap/" + src.Namespace + "/" + src.Name
	return rl, nil
}

// prefixReference puts prefix before the message of a reference error, and
// returns other errors as they are.
func prefixReference(err error, prefix string) error {
	var ref *referenceError
	if errors.As(err, &ref) {
		return &referenceError{msg: prefix + ref.msg}
	}
	return err
}

// labelled lists the layer ConfigMaps of ns, sorted by name.
func (r *resolver) labelled(ctx context.Context, ns string) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := r.reader.List(ctx, &list, client.InNamespace(ns), client.HasLabels{runconfig.LayerLabel}); err != nil {
		return nil, fmt.Errorf("list layer ConfigMaps in %s: %w", ns, err)
	}
	sortLayers(list.Items)
	return list.Items, nil
}

// trustPins reads spec.trust.pinsFrom.
func (r *resolver) trustPins(ctx context.Context, s *aeriev1alpha1.AgentSession) ([]runconfig.TrustPins, error) {
	if s.Spec.Trust == nil {
		return nil, nil
	}
	var pins []runconfig.TrustPins
	for i, ref := range s.Spec.Trust.PinsFrom {
		v, err := r.configMapKey(ctx, s.Namespace, fmt.Sprintf("trust.pinsFrom[%d]", i), ref)
		if err != nil {
			return nil, err
		}
		pins = append(pins, runconfig.TrustPins{Source: "configmap/" + ref.Name + "/" + ref.Key, TOML: v})
	}
	return pins, nil
}

// applyConfigMap applies cm with server-side apply as the controller, and
// sets cm's owner references to those the ConfigMap has, which others
// may have added.
func applyConfigMap(c client.Client) func(ctx context.Context, cm *corev1.ConfigMap) error {
	return func(ctx context.Context, cm *corev1.ConfigMap) error {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
		if err != nil {
			return fmt.Errorf("convert ConfigMap %s: %w", cm.Name, err)
		}
		// Status and creationTimestamp are not the applier's to set.
		delete(u["metadata"].(map[string]any), "creationTimestamp")
		obj := &unstructured.Unstructured{Object: u}
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
			client.FieldOwner(fieldOwner), client.ForceOwnership)
		if err != nil {
			return err
		}
		cm.OwnerReferences = obj.GetOwnerReferences()
		return nil
	}
}

// ownConfigMap adds an owner reference to a ConfigMap with a strategic
// merge patch, which merges owner references by UID: the other sessions'
// stay, and adding one that is there already changes nothing. (A
// server-side apply by the one field manager would drop the references it
// applied before and does not apply again.)
func ownConfigMap(c client.Client) func(ctx context.Context, cm *corev1.ConfigMap, owner metav1.OwnerReference) error {
	return func(ctx context.Context, cm *corev1.ConfigMap, owner metav1.OwnerReference) error {
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{owner}},
		})
		if err != nil {
			return fmt.Errorf("encode owner reference: %w", err)
		}
		target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace}}
		return c.Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, patch), client.FieldOwner(fieldOwner))
	}
}

// isReferenceError reports whether err fails the session.
func isReferenceError(err error) bool {
	var re *referenceError
	return errors.As(err, &re)
}
