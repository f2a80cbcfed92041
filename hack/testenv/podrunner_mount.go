package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// MountMode says how a container of the local pod runner sees its volumes.
type MountMode int

const (
	// MountAuto uses MountNamespace where the runner can create mount
	// namespaces (root with CAP_SYS_ADMIN, as on CI), MountPathMap
	// elsewhere.
	MountAuto MountMode = iota
	// MountNamespace starts every container in a private mount namespace
	// in which each volume is bind-mounted at its real mount path
	// (read-only where the pod says so), the termination message file at
	// terminationMessagePath, and the hostname is the pod's: the program
	// sees /workspace, /etc/aerie/layers/0 and /run/aerie exactly as in a
	// cluster and needs nothing special. Missing mount points are created
	// (empty) on the host's file system, as a container runtime creates
	// them in an image; nothing is mounted outside the namespaces.
	MountNamespace
	// MountPathMap runs containers in the runner's own view of the file
	// system and maps mount paths instead: see PathMapEnv.
	MountPathMap
)

func (m MountMode) String() string {
	switch m {
	case MountAuto:
		return "auto"
	case MountNamespace:
		return "namespace"
	case MountPathMap:
		return "path-map"
	}
	return fmt.Sprintf("MountMode(%d)", int(m))
}

// PathMapEnv is the variable that, under MountPathMap, holds the mount
// paths of the container and the local paths that stand for them, as a
// JSON object: {"/workspace": "/tmp/…/volumes/workspace",
// "/dev/termination-log": "/tmp/…/termination-log", …}.
//
// Under MountPathMap the runner rewrites every mount path that appears as
// a path in the container's command, args, env values and workingDir (at
// the start of the string or after a character that cannot be part of a
// path, and followed by the end, '/' or such a character; the longest
// mount path wins). A program that gets its paths from those needs to do
// nothing. A program must map through PathMapEnv every absolute path it
// finds anywhere else — in a file's content, or built in, such as
// /dev/termination-log — by replacing the longest key that equals the path
// or is followed in it by '/'. readOnly is not enforced in this mode, and
// runAsUser only when the runner is root.
const PathMapEnv = "AERIE_PATH_MAP"

// pathMap is the mapping of one container under MountPathMap.
type pathMap struct {
	m    map[string]string
	keys []string // longest first
}

func newPathMap(m map[string]string) *pathMap {
	keys := slices.Collect(func(yield func(string) bool) {
		for k := range m {
			if k != "/" && !yield(k) {
				return
			}
		}
	})
	slices.SortFunc(keys, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return &pathMap{m: m, keys: keys}
}

// pathByte reports whether c can be part of a path name next to a mount
// path, so that /workspace2 or /a/workspace is not /workspace.
func pathByte(c byte) bool {
	return c == '/' || c == '.' || c == '-' || c == '_' || c == '~' || c == '+' ||
		'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= 0x80
}

// rewrite replaces the mount paths that stand as paths in s.
func (p *pathMap) rewrite(s string) string {
	if len(p.keys) == 0 || !strings.Contains(s, "/") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] == '/' && (i == 0 || !pathByte(s[i-1])) {
			if k := p.match(s[i:]); k != "" {
				b.WriteString(p.m[k])
				i += len(k)
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// match returns the longest key that s starts with as a whole path.
func (p *pathMap) match(s string) string {
	for _, k := range p.keys {
		if strings.HasPrefix(s, k) && (len(s) == len(k) || s[len(k)] == '/' || !pathByte(s[len(k)])) {
			return k
		}
	}
	return ""
}

// environ returns PathMapEnv=<JSON>.
func (p *pathMap) environ() string {
	b, _ := json.Marshal(p.m) // a map of strings always marshals
	return PathMapEnv + "=" + string(b)
}

// mount is one bind mount of a container.
type mount struct {
	// Target is the path in the container.
	Target string
	// Source is the local file or directory.
	Source   string
	ReadOnly bool
	// File says that Source is a file, not a directory.
	File bool
}

// probeMountNamespace checks that this process can give a thread a
// private mount namespace and bind-mount in it, which needs root with
// CAP_SYS_ADMIN (and no seccomp profile forbidding unshare and mount).
func probeMountNamespace(scratch string) error {
	src, err := os.MkdirTemp(scratch, "probe-src-")
	if err != nil {
		return fmt.Errorf("probe mount namespace: %w", err)
	}
	defer os.Remove(src) //nolint:errcheck // best-effort removal of an empty probe directory
	dst, err := os.MkdirTemp(scratch, "probe-dst-")
	if err != nil {
		return fmt.Errorf("probe mount namespace: %w", err)
	}
	defer os.Remove(dst) //nolint:errcheck // best-effort removal of an empty probe directory
	errc := make(chan error, 1)
	go func() {
		// The thread's namespace is changed for good: the goroutine ends
		// locked, and the runtime then ends the thread with it.
		runtime.LockOSThread()
		errc <- enterMountNamespace("", []mount{{Target: dst, Source: src, ReadOnly: true}})
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("probe mount namespace: %w", err)
	}
	return nil
}

// enterMountNamespace moves the calling thread, which must be locked to
// its goroutine for good, into a private mount namespace (and a UTS
// namespace with hostname, when set) and bind-mounts mounts in it. A child
// started from the thread inherits the namespaces.
func enterMountNamespace(hostname string, mounts []mount) error {
	flags := unix.CLONE_NEWNS
	if hostname != "" {
		flags |= unix.CLONE_NEWUTS
	}
	if err := unix.Unshare(flags); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	// Slave, not private: mounts made on the host later still show, and
	// nothing mounted here ever propagates back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make mounts slave: %w", err)
	}
	if hostname != "" {
		if err := unix.Sethostname([]byte(hostname)); err != nil {
			return fmt.Errorf("set hostname: %w", err)
		}
	}
	// Shallow first, so that a mount inside another lands in it.
	sorted := slices.Clone(mounts)
	slices.SortStableFunc(sorted, func(a, b mount) int {
		return strings.Count(filepath.Clean(a.Target), "/") - strings.Count(filepath.Clean(b.Target), "/")
	})
	// Every source is opened before anything is mounted: a mount at, say,
	// /tmp would otherwise hide the sources that lie below it (the
	// runner's Dir is often there). The mounts then name the sources by
	// their descriptors.
	sources := make([]int, len(sorted))
	for i, m := range sorted {
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, fd := range sources[:i] {
				unix.Close(fd)
			}
			return fmt.Errorf("open mount source %s: %w", m.Source, err)
		}
		sources[i] = fd
	}
	defer func() {
		for _, fd := range sources {
			unix.Close(fd)
		}
	}()
	for i, m := range sorted {
		if err := makeMountPoint(m); err != nil {
			return err
		}
		src := fmt.Sprintf("/proc/self/fd/%d", sources[i])
		if err := unix.Mount(src, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mount %s at %s: %w", m.Source, m.Target, err)
		}
	}
	// Read-only last: a mount point inside a read-only volume must be made
	// before the volume turns read-only.
	for _, m := range sorted {
		if !m.ReadOnly {
			continue
		}
		if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", m.Target, err)
		}
	}
	return nil
}

// makeMountPoint creates the file or directory a bind mount needs at its
// target.
func makeMountPoint(m mount) error {
	target := filepath.Clean(m.Target)
	if !filepath.IsAbs(target) || target == "/" {
		return fmt.Errorf("mount path %q: must be an absolute path other than /", m.Target)
	}
	fi, err := os.Stat(target)
	switch {
	case err == nil && fi.IsDir() == !m.File:
		return nil
	case err == nil && m.File:
		return fmt.Errorf("mount path %s: is a directory, the mount is a file", target)
	case err == nil:
		return fmt.Errorf("mount path %s: is a file, the mount is a directory", target)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("mount path %s: %w", target, err)
	}
	if !m.File {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("create mount point: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("create mount point: %w", err)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create mount point: %w", err)
	}
	return f.Close()
}
