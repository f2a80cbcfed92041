package testenv

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podVolume is a volume of a pod, materialised as a local directory (or,
// for a hostPath, whatever the path is).
type podVolume struct {
	path string
	// readOnly: the kubelet always mounts this kind read-only (configMap,
	// secret, downwardAPI, projected).
	readOnly bool
	file     bool
}

// volumeFile is a file of a configMap, secret, downwardAPI or projected
// volume.
type volumeFile struct {
	path string // relative to the volume
	data []byte
	mode os.FileMode
}

// prepareVolumes materialises every volume of the pod. Content is taken
// once, when the pod starts: the runner does not follow later changes of a
// ConfigMap or Secret as a kubelet eventually would.
func (w *podWorker) prepareVolumes(ctx context.Context) (map[string]podVolume, error) {
	vols := make(map[string]podVolume, len(w.pod.Spec.Volumes))
	var fsGroup *int64
	if sc := w.pod.Spec.SecurityContext; sc != nil && w.r.root {
		fsGroup = sc.FSGroup
	}
	for _, v := range w.pod.Spec.Volumes {
		dir := filepath.Join(w.dir, "volumes", v.Name)
		var files []volumeFile
		var err error
		switch {
		case v.EmptyDir != nil:
			// Shared by every container of the pod, whatever their UIDs,
			// like the kubelet's 0777 emptyDir.
			if err := makeSharedDir(dir, fsGroup); err != nil {
				return nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			vols[v.Name] = podVolume{path: dir}
			continue
		case v.PersistentVolumeClaim != nil:
			claim := v.PersistentVolumeClaim.ClaimName
			_, err := w.r.cs.CoreV1().PersistentVolumeClaims(w.namespace).Get(ctx, claim, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("volume %q: persistentvolumeclaim %q not found", v.Name, claim)
			} else if err != nil {
				return nil, fmt.Errorf("volume %q: get persistentvolumeclaim %q: %w", v.Name, claim, err)
			}
			// One directory per claim, kept for the life of the runner,
			// whichever pods use it.
			dir := w.r.VolumePath(w.pod, v.Name)
			if err := makeSharedDir(dir, fsGroup); err != nil {
				return nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			vols[v.Name] = podVolume{path: dir, readOnly: v.PersistentVolumeClaim.ReadOnly}
			continue
		case v.HostPath != nil:
			pv, err := hostPathVolume(v.HostPath)
			if err != nil {
				return nil, fmt.Errorf("volume %q: %w", v.Name, err)
			}
			vols[v.Name] = pv
			continue
		case v.ConfigMap != nil:
			files, err = w.configMapFiles(ctx, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, modeOr(v.ConfigMap.DefaultMode))
		case v.Secret != nil:
			files, err = w.secretFiles(ctx, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, modeOr(v.Secret.DefaultMode))
		case v.DownwardAPI != nil:
			files, err = w.downwardFiles(v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode))
		case v.Projected != nil:
			files, err = w.projectedFiles(ctx, v.Projected)
		default:
			return nil, fmt.Errorf("volume %q: this kind of volume is not supported by the local pod runner (emptyDir, persistentVolumeClaim, hostPath, configMap, secret, downwardAPI and projected are)", v.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		if err := writeVolume(dir, files, fsGroup); err != nil {
			return nil, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		vols[v.Name] = podVolume{path: dir, readOnly: true}
	}
	return vols, nil
}

// modeOr is a volume's defaultMode, 0644 when unset as in the API.
func modeOr(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m) & 0o777
}

// makeSharedDir creates a writable directory for every user: 0777, or with
// fsGroup, group-owned by it, setgid and group-writable.
func makeSharedDir(dir string, fsGroup *int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create volume directory: %w", err)
	}
	mode := os.FileMode(0o777)
	if fsGroup != nil {
		if err := os.Chown(dir, -1, int(*fsGroup)); err != nil {
			return fmt.Errorf("apply fsGroup: %w", err)
		}
		mode |= os.ModeSetgid
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("create volume directory: %w", err)
	}
	return nil
}

func hostPathVolume(hp *corev1.HostPathVolumeSource) (podVolume, error) {
	typ := corev1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	switch typ {
	case corev1.HostPathDirectoryOrCreate:
		if err := os.MkdirAll(hp.Path, 0o755); err != nil {
			return podVolume{}, fmt.Errorf("hostPath: %w", err)
		}
	case corev1.HostPathFileOrCreate:
		f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return podVolume{}, fmt.Errorf("hostPath: %w", err)
		}
		if err := f.Close(); err != nil {
			return podVolume{}, fmt.Errorf("hostPath: %w", err)
		}
	}
	fi, err := os.Stat(hp.Path)
	if err != nil {
		return podVolume{}, fmt.Errorf("hostPath: %w", err)
	}
	switch {
	case typ == corev1.HostPathDirectory && !fi.IsDir():
		return podVolume{}, fmt.Errorf("hostPath %s: not a directory", hp.Path)
	case typ == corev1.HostPathFile && !fi.Mode().IsRegular():
		return podVolume{}, fmt.Errorf("hostPath %s: not a file", hp.Path)
	}
	return podVolume{path: hp.Path, file: !fi.IsDir()}, nil
}

func (w *podWorker) configMapFiles(ctx context.Context, name string, items []corev1.KeyToPath, optional *bool, mode os.FileMode) ([]volumeFile, error) {
	cm, err := w.configMap(ctx, name, optional)
	if err != nil || cm == nil {
		return nil, err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	return keyFiles("ConfigMap", w.namespace+"/"+name, data, items, isOptional(optional), mode)
}

func (w *podWorker) secretFiles(ctx context.Context, name string, items []corev1.KeyToPath, optional *bool, mode os.FileMode) ([]volumeFile, error) {
	s, err := w.secret(ctx, name, optional)
	if err != nil || s == nil {
		return nil, err
	}
	return keyFiles("Secret", w.namespace+"/"+name, s.Data, items, isOptional(optional), mode)
}

// keyFiles lays the keys of a ConfigMap or Secret out as files: every key
// under its own name, or only the listed items at their paths and modes.
func keyFiles(kind, name string, data map[string][]byte, items []corev1.KeyToPath, optional bool, mode os.FileMode) ([]volumeFile, error) {
	var files []volumeFile
	if len(items) == 0 {
		for _, k := range slices.Sorted(maps.Keys(data)) {
			files = append(files, volumeFile{path: k, data: data[k], mode: mode})
		}
		return files, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s %s has no key %q, which items[].key names", kind, name, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode) & 0o777
		}
		files = append(files, volumeFile{path: it.Path, data: v, mode: m})
	}
	return files, nil
}

func (w *podWorker) downwardFiles(items []corev1.DownwardAPIVolumeFile, mode os.FileMode) ([]volumeFile, error) {
	var files []volumeFile
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podFieldValue(w.pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = resourceFieldValue(w.pod, "", it.ResourceFieldRef, w.r.capacity)
		default:
			err = fmt.Errorf("downwardAPI item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, err
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode) & 0o777
		}
		files = append(files, volumeFile{path: it.Path, data: []byte(v), mode: m})
	}
	return files, nil
}

func (w *podWorker) projectedFiles(ctx context.Context, p *corev1.ProjectedVolumeSource) ([]volumeFile, error) {
	mode := modeOr(p.DefaultMode)
	var files []volumeFile
	for i, src := range p.Sources {
		var more []volumeFile
		var err error
		switch {
		case src.ConfigMap != nil:
			more, err = w.configMapFiles(ctx, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, mode)
		case src.Secret != nil:
			more, err = w.secretFiles(ctx, src.Secret.Name, src.Secret.Items, src.Secret.Optional, mode)
		case src.DownwardAPI != nil:
			more, err = w.downwardFiles(src.DownwardAPI.Items, mode)
		default:
			err = fmt.Errorf("projected source %d: only configMap, secret and downwardAPI sources are supported by the local pod runner", i)
		}
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return files, nil
}

// writeVolume writes files into a fresh dir. With fsGroup the files belong
// to that group and are group-readable, as the kubelet makes them.
func writeVolume(dir string, files []volumeFile, fsGroup *int64) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear volume directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create volume directory: %w", err)
	}
	for _, f := range files {
		rel := filepath.Clean(f.path)
		if filepath.IsAbs(rel) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("path %q: must be relative and stay inside the volume", f.path)
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
		if err := os.WriteFile(p, f.data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
		mode := f.mode
		if fsGroup != nil {
			mode |= 0o440
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	if fsGroup == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(*fsGroup)); err != nil {
			return fmt.Errorf("apply fsGroup: %w", err)
		}
		return nil
	})
}
