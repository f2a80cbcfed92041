package runconfig

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// A layer ConfigMap holds a directory tree: each key is a file. ConfigMap
// keys may only use letters, digits, '-', '_' and '.', so a key spells its
// path with "__" for each '/': the key skills__review__SKILL.md is the file
// skills/review/SKILL.md. A path that this cannot spell (a name with "__" in
// it, such as __init__.py) is given in the PathsAnnotation instead.
// Executable files are listed by path in the ExecutablesAnnotation; they are
// mounted with mode 0555, every other file 0444.
const (
	// LayerLabel marks a ConfigMap as a namespace layer (in a session's
	// namespace) or a platform layer (in the controller's namespace).
	LayerLabel = "aerie.run/layer"
	// PathsAnnotation is a JSON object from key to path, for keys whose
	// path the "__" rule cannot spell: {"init": "tools/lib/__init__.py"}.
	PathsAnnotation = "aerie.run/paths"
	// ExecutablesAnnotation is a JSON array of the paths of the layer's
	// executable files: ["tools/lint.sh"].
	ExecutablesAnnotation = "aerie.run/executables"
)

// File modes of layer files in the pod.
const (
	ModeFile       fs.FileMode = 0o444
	ModeExecutable fs.FileMode = 0o555
)

// LayerFile is one file of a layer ConfigMap.
type LayerFile struct {
	// Key is the ConfigMap key that holds the file.
	Key string
	// Path is the file's path in the layer directory, slash-separated.
	Path       string
	Executable bool
	Data       []byte
}

// Mode is the file's mode in the pod.
func (f LayerFile) Mode() fs.FileMode {
	if f.Executable {
		return ModeExecutable
	}
	return ModeFile
}

// KeyPath is the path the "__" rule gives a key.
func KeyPath(key string) string { return strings.ReplaceAll(key, "__", "/") }

// PathKey is the key that spells p by the "__" rule, and whether the rule
// can spell it at all (KeyPath(PathKey(p)) == p).
func PathKey(p string) (string, bool) {
	k := strings.ReplaceAll(p, "/", "__")
	return k, KeyPath(k) == p
}

// LayerFiles decodes the files of a layer ConfigMap from its data, binary
// data and annotations, sorted by path. Errors name the key or annotation
// at fault.
func LayerFiles(
	data map[string]string, binaryData map[string][]byte, annotations map[string]string,
) ([]LayerFile, error) {
	paths := map[string]string{}
	if s, ok := annotations[PathsAnnotation]; ok {
		if err := json.Unmarshal([]byte(s), &paths); err != nil {
			return nil, fmt.Errorf("annotation %s: want a JSON object from key to path: %w", PathsAnnotation, err)
		}
	}
	var execs []string
	if s, ok := annotations[ExecutablesAnnotation]; ok {
		if err := json.Unmarshal([]byte(s), &execs); err != nil {
			return nil, fmt.Errorf("annotation %s: want a JSON array of paths: %w", ExecutablesAnnotation, err)
		}
	}

	files := make([]LayerFile, 0, len(data)+len(binaryData))
	add := func(key string, b []byte) error {
		p, explicit := paths[key]
		if !explicit {
			p = KeyPath(key)
		}
		if err := checkLayerPath(p); err != nil {
			if explicit {
				return fmt.Errorf("annotation %s: key %q: %w", PathsAnnotation, key, err)
			}
			return fmt.Errorf("key %q: %w; give its path in the annotation %s", key, err, PathsAnnotation)
		}
		files = append(files, LayerFile{Key: key, Path: p, Data: b})
		return nil
	}
	for k, v := range data {
		if err := add(k, []byte(v)); err != nil {
			return nil, err
		}
	}
	for k, v := range binaryData {
		if _, dup := data[k]; dup {
			return nil, fmt.Errorf("key %q: in both data and binaryData", k)
		}
		if err := add(k, v); err != nil {
			return nil, err
		}
	}
	for k := range paths {
		_, inData := data[k]
		_, inBinary := binaryData[k]
		if !inData && !inBinary {
			return nil, fmt.Errorf("annotation %s: key %q is not in the ConfigMap", PathsAnnotation, k)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })

	byPath := make(map[string]int, len(files))
	for i, f := range files {
		if j, ok := byPath[f.Path]; ok {
			return nil, fmt.Errorf("keys %q and %q are both the file %s", files[j].Key, f.Key, f.Path)
		}
		byPath[f.Path] = i
	}
	// A file cannot also be a directory of another file. Sorted, a
	// directory's files come right after it (its "/" sorts before the
	// characters that could follow in a sibling's name, except those
	// below '/': checked for every file anyway).
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			if j, ok := byPath[dir]; ok {
				return nil, fmt.Errorf("key %q is the file %s, which key %q needs as a directory", files[j].Key, dir, f.Key)
			}
		}
	}
	for _, p := range execs {
		i, ok := byPath[p]
		if !ok {
			return nil, fmt.Errorf("annotation %s: %q is not a file of the layer", ExecutablesAnnotation, p)
		}
		files[i].Executable = true
	}
	return files, nil
}

// checkLayerPath accepts the relative paths a ConfigMap volume item may
// have: clean, without "." or ".." segments, not starting with "..".
func checkLayerPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute (a key cannot start with \"__\")", p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("path %q starts with \"..\"", p)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (empty, '.' or '..' segments, or a trailing '/')", p)
	case len(p) > 4096:
		return fmt.Errorf("path %q is longer than 4096 bytes", p[:64]+"…")
	}
	for _, seg := range strings.Split(p, "/") {
		if len(seg) > 255 {
			return fmt.Errorf("path %q has a name longer than 255 bytes", p)
		}
	}
	return nil
}

// LayerDigest is the content digest of a layer: sha256 over its files'
// paths, modes and contents in path order. Two ConfigMaps with the same tree
// have the same digest whatever their keys, names or other metadata.
func LayerDigest(files []LayerFile) string {
	sorted := append([]LayerFile(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	h := sha256.New()
	var n [8]byte
	for _, f := range sorted {
		// Length-prefixed fields: no two different trees hash the same
		// byte stream.
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Path)))
		h.Write(n[:])
		h.Write([]byte(f.Path))
		binary.BigEndian.PutUint32(n[:4], uint32(f.Mode()))
		h.Write(n[:4])
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Data)))
		h.Write(n[:])
		h.Write(f.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
