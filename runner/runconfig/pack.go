package runconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"unicode/utf8"
)

// MaxLayerBytes is what a layer ConfigMap can hold: the API server refuses
// objects over 1 MiB, and the metadata needs some of it.
const MaxLayerBytes = 1<<20 - 16<<10

// PackTree is a directory to pack into a layer, its files under Prefix
// (slash-separated; "" for the layer's root).
type PackTree struct {
	Dir    string
	Prefix string
}

// PackedLayer is the content of a layer ConfigMap: LayerFiles reads it back.
type PackedLayer struct {
	Data        map[string]string
	BinaryData  map[string][]byte
	Annotations map[string]string
}

type packedFile struct {
	path string
	size int
}

// PackLayer packs the trees into one layer ConfigMap's content, executable
// bits included: each file is a key by the "__" rule, paths the rule cannot
// spell go in PathsAnnotation, executables in ExecutablesAnnotation, files
// that are not UTF-8 in BinaryData. Symbolic links and special files are
// refused, and so is content that does not fit in a ConfigMap, naming the
// largest files. A tree is read through an os.Root.
func PackLayer(trees ...PackTree) (*PackedLayer, error) {
	out := &PackedLayer{}
	paths := map[string]string{}
	var executables []string
	var files []packedFile
	total := 0
	for _, tree := range trees {
		n, err := packTree(tree, out, paths, &executables, &files)
		if err != nil {
			return nil, err
		}
		total += n
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("the directory holds no files")
	}
	if total > MaxLayerBytes {
		sort.Slice(files, func(i, j int) bool { return files[i].size > files[j].size })
		var largest bytes.Buffer
		for i, f := range files {
			if i == 3 {
				break
			}
			fmt.Fprintf(&largest, "\n  %s (%d bytes)", f.path, f.size)
		}
		return nil, fmt.Errorf("%d bytes do not fit in a ConfigMap (at most %d); the largest files:%s\n"+
			"put large files in a volume layer (spec.extensions[].persistentVolumeClaim or image) instead",
			total, MaxLayerBytes, largest.String())
	}
	if len(paths) > 0 || len(executables) > 0 {
		out.Annotations = map[string]string{}
	}
	if len(paths) > 0 {
		b, _ := json.Marshal(paths)
		out.Annotations[PathsAnnotation] = string(b)
	}
	if len(executables) > 0 {
		sort.Strings(executables)
		b, _ := json.Marshal(executables)
		out.Annotations[ExecutablesAnnotation] = string(b)
	}
	// Check the result the way the controller and the runner read it.
	if _, err := LayerFiles(out.Data, out.BinaryData, out.Annotations); err != nil {
		return nil, err
	}
	return out, nil
}

// packTree adds one tree's files and returns the bytes they take.
func packTree(
	tree PackTree, out *PackedLayer, paths map[string]string, executables *[]string, files *[]packedFile,
) (int, error) {
	root, err := os.OpenRoot(tree.Dir)
	if err != nil {
		return 0, err
	}
	defer root.Close() //nolint:errcheck // read-only
	total := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is a %s; a layer holds regular files and directories only",
				filepath.Join(tree.Dir, p), typeName(d.Type()))
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := root.ReadFile(p)
		if err != nil {
			return err
		}
		lp := path.Join(tree.Prefix, p)
		key, ok := PathKey(lp)
		if !ok {
			key = "file-" + strconv.Itoa(len(paths)+1)
			paths[key] = lp
		}
		if _, dup := out.Data[key]; dup {
			return fmt.Errorf("%s: two files of the layer are %s", filepath.Join(tree.Dir, p), lp)
		}
		if utf8.Valid(data) {
			if out.Data == nil {
				out.Data = map[string]string{}
			}
			out.Data[key] = string(data)
		} else {
			if out.BinaryData == nil {
				out.BinaryData = map[string][]byte{}
			}
			out.BinaryData[key] = data
		}
		if info.Mode()&0o111 != 0 {
			*executables = append(*executables, lp)
		}
		*files = append(*files, packedFile{lp, len(data)})
		total += len(key) + len(data)
		return nil
	})
	return total, err
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
