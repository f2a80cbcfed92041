package controllers

import (
	"fmt"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	aeriev1alpha1 "github.com/aerie-run/aerie/api/v1alpha1"
	"github.com/aerie-run/aerie/runner/runconfig"
)

// LabelPlatformLayer marks a mirror of a platform layer in a session's
// namespace with the name of the platform ConfigMap it copies, and
// LabelLayerMirror a mirror of a ConfigMap of the session's own namespace
// (a namespace layer, or one spec.extensions names). Mirrors do not carry
// runconfig.LayerLabel: they are not namespace layers.
const (
	LabelPlatformLayer = "aerie.run/platform-layer"
	LabelLayerMirror   = "aerie.run/layer-mirror"
)

// configMapLayer is a ConfigMap as a layer: its files become the volume's
// items, each at its path with its mode, and its content is digested.
func configMapLayer(name, kind string, cm *corev1.ConfigMap) (resolvedLayer, error) {
	files, err := runconfig.LayerFiles(cm.Data, cm.BinaryData, cm.Annotations)
	if err != nil {
		return resolvedLayer{}, fmt.Errorf("layer ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	items := make([]corev1.KeyToPath, 0, len(files))
	for _, f := range files {
		items = append(items, corev1.KeyToPath{Key: f.Key, Path: f.Path, Mode: ptr.To(int32(f.Mode()))})
	}
	return resolvedLayer{
		Name:   name,
		Kind:   kind,
		Digest: runconfig.LayerDigest(files),
		Origin: "configmap/" + cm.Name,
		Source: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
			Items:                items,
			DefaultMode:          ptr.To(int32(runconfig.ModeFile)),
		}},
	}, nil
}

// specLayerName is the name of a spec.extensions layer in reports.
func specLayerName(l aeriev1alpha1.ExtensionLayer) string {
	switch {
	case l.Name != "":
		return l.Name
	case l.ConfigMap != nil:
		return l.ConfigMap.Name
	case l.PersistentVolumeClaim != nil:
		return l.PersistentVolumeClaim.ClaimName
	case l.Image != nil:
		return l.Image.Reference
	}
	return ""
}

// volumeLayer is a spec.extensions layer held on a PVC or in an image.
func volumeLayer(l aeriev1alpha1.ExtensionLayer) resolvedLayer {
	r := resolvedLayer{Name: specLayerName(l), Kind: runconfig.LayerSpec}
	switch {
	case l.PersistentVolumeClaim != nil:
		r.Source = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: l.PersistentVolumeClaim.ClaimName,
			ReadOnly:  true,
		}}
		r.SubPath = l.PersistentVolumeClaim.SubPath
		r.Origin = path.Join("pvc", l.PersistentVolumeClaim.ClaimName, r.SubPath)
	case l.Image != nil:
		r.Source = corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
			Reference:  l.Image.Reference,
			PullPolicy: l.Image.PullPolicy,
		}}
		r.SubPath = l.Image.SubPath
		r.Origin = "image/" + l.Image.Reference
		if r.SubPath != "" {
			r.Origin += "/" + r.SubPath
		}
		if _, digest, ok := strings.Cut(l.Image.Reference, "@"); ok && strings.HasPrefix(digest, "sha256:") {
			r.Digest = digest
		}
	}
	return r
}

// sortLayers orders labelled layer ConfigMaps by name: the label's
// presence makes a layer, and the name orders it, nearest first.
func sortLayers(cms []corev1.ConfigMap) {
	sort.Slice(cms, func(i, j int) bool { return cms[i].Name < cms[j].Name })
}

// mirrorName is the name of a layer's mirror: aerie-platform- (a platform
// layer) or aerie-layer- (a ConfigMap of the session's namespace), the
// source's name (shortened) and the digest of its content, so that a
// changed layer gets a new mirror and sessions that use the old one keep it.
func mirrorName(kind, source, digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")[:16]
	prefix := "aerie-layer-"
	if kind == runconfig.LayerPlatform {
		prefix = "aerie-platform-"
	}
	room := 253 - len(prefix) - 1 - len(hex)
	if len(source) > room {
		source = trimName(source[:room])
	}
	return prefix + source + "-" + hex
}

// desiredMirror is the immutable copy of layer src, of kind, in namespace:
// its files and the annotations that give their paths and modes. Its owners
// are the sessions that mount it (mirrorOwner), added one by one, so that
// it is garbage-collected with the last of them.
func desiredMirror(src *corev1.ConfigMap, namespace, kind, digest string) *corev1.ConfigMap {
	annotations := map[string]string{}
	for _, k := range []string{runconfig.PathsAnnotation, runconfig.ExecutablesAnnotation} {
		if v, ok := src.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	component, label := "layer-mirror", LabelLayerMirror
	if kind == runconfig.LayerPlatform {
		component, label = "platform-layer", LabelPlatformLayer
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      mirrorName(kind, src.Name, digest),
			Namespace: namespace,
			Labels: map[string]string{
				labelManagedBy:   managedBy,
				labelComponent:   component,
				label:            trimName(truncate(src.Name, 63)),
				LabelLayerDigest: strings.TrimPrefix(digest, "sha256:")[:63],
			},
			Annotations: annotations,
		},
		Immutable:  ptr.To(true),
		Data:       src.Data,
		BinaryData: src.BinaryData,
	}
}

// mirrorOwner is a session's owner reference on a mirror it mounts: not
// the controller (the mirror is shared), and not blocking the session's
// deletion.
func mirrorOwner(s *aeriev1alpha1.AgentSession) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: aeriev1alpha1.GroupVersion.String(),
		Kind:       "AgentSession",
		Name:       s.Name,
		UID:        s.UID,
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
