package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpandVars(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"A": "alpha", "B": "$(A)", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(A)", "alpha"},
		{"x$(A)y$(A)z", "xalphayalphaz"},
		{"$(B)", "$(A)"}, // values are not expanded again
		{"$(EMPTY)!", "!"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$alpha"},
		{"$$", "$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$x", "$x"},
		{"$(A", "$(A"},
		{"$(", "$("},
		{"$()", "$()"},
		{"$(A)$(A", "alpha$(A"},
	} {
		if got := expandVars(tc.in, lookup); got != tc.want {
			t.Errorf("expandVars(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzExpandVars(f *testing.F) {
	for _, s := range []string{"", "$(A)", "$$(A)", "$(A", "$", "a$b$(c)$$", "$((A))", "$(A)$(B)$(C)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		unknown := func(string) (string, bool) { return "", false }
		got := expandVars(s, unknown)
		// Without known names only $$ pairs shrink.
		if len(got) > len(s) {
			t.Errorf("expandVars(%q) without variables grew to %q", s, got)
		}
		if !strings.Contains(s, "$") && got != s {
			t.Errorf("expandVars(%q) = %q, want it unchanged", s, got)
		}
		// A name that maps to itself in the $(…) form changes nothing
		// that an unknown name would not.
		self := func(n string) (string, bool) { return "$(" + n + ")", true }
		if again := expandVars(s, self); again != got {
			t.Errorf("expandVars(%q): with self-mapping %q, with unknown names %q", s, again, got)
		}
	})
}

func TestPathMapRewrite(t *testing.T) {
	t.Parallel()
	pm := newPathMap(map[string]string{
		"/workspace":           "/L/ws",
		"/etc/aerie/layers/0":  "/L/layer0",
		"/etc/aerie/layers/01": "/L/layer01",
		"/etc/aerie":           "/L/etc",
		"/dev/termination-log": "/L/term",
		"/":                    "/L/root", // never rewritten: it would match everything
	})
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"/workspace", "/L/ws"},
		{"/workspace/", "/L/ws/"},
		{"/workspace/a/b", "/L/ws/a/b"},
		{"/workspace2", "/workspace2"},
		{"/workspace.d", "/workspace.d"},
		{"/a/workspace", "/a/workspace"},
		{"x/workspace", "x/workspace"},
		{"--dir=/workspace", "--dir=/L/ws"},
		{"-d/workspace", "-d/workspace"}, // preceded by a name character
		{"PATH=/bin:/workspace/bin", "PATH=/bin:/L/ws/bin"},
		{"cat /etc/aerie/layers/0/x > /dev/termination-log", "cat /L/layer0/x > /L/term"},
		{"/etc/aerie/layers/01/x", "/L/layer01/x"},
		{"/etc/aerie/layers/02/x", "/L/etc/layers/02/x"},
		{"/etc/aerie", "/L/etc"},
		{"/etc/aeriex", "/etc/aeriex"},
		{`"/workspace"`, `"/L/ws"`},
		{"/workspace,/workspace", "/L/ws,/L/ws"},
		{"/", "/"},
		{"/usr/bin", "/usr/bin"},
	} {
		if got := pm.rewrite(tc.in); got != tc.want {
			t.Errorf("rewrite(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var m map[string]string
	name, value, _ := strings.Cut(pm.environ(), "=")
	if name != PathMapEnv {
		t.Errorf("environ names %q, want %q", name, PathMapEnv)
	}
	if err := json.Unmarshal([]byte(value), &m); err != nil || m["/workspace"] != "/L/ws" {
		t.Errorf("environ value %q: %v, %v", value, m, err)
	}
}

func FuzzPathMapRewrite(f *testing.F) {
	for _, s := range []string{"/workspace", "cd /workspace && ls /etc/aerie/layers/0/a", "/workspace2", "x=/run/aerie:/workspace", ""} {
		f.Add(s)
	}
	// Local paths that cannot come out of the rewrite of anything else.
	pm := newPathMap(map[string]string{"/workspace": "\x00ws", "/etc/aerie/layers/0": "\x00l0", "/run/aerie": "\x00run"})
	back := strings.NewReplacer("\x00ws", "/workspace", "\x00l0", "/etc/aerie/layers/0", "\x00run", "/run/aerie")
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "\x00") {
			return
		}
		got := pm.rewrite(s)
		if back.Replace(got) != s {
			t.Errorf("rewrite(%q) = %q does not map back", s, got)
		}
		if !strings.Contains(s, "/") && got != s {
			t.Errorf("rewrite(%q) = %q, but it has no path", s, got)
		}
	})
}

func TestParseCRIEntry(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600700800, time.UTC)
	for _, tc := range []struct {
		line string
		want criEntry
		err  string
	}{
		{line: "2026-01-02T03:04:05.6007008Z stdout F hello world", want: criEntry{Time: ts, Stream: "stdout", Content: []byte("hello world")}},
		{line: "2026-01-02T03:04:05.6007008Z stderr P part", want: criEntry{Time: ts, Stream: "stderr", Partial: true, Content: []byte("part")}},
		{line: "2026-01-02T03:04:05.6007008Z stdout F ", want: criEntry{Time: ts, Stream: "stdout", Content: []byte{}}},
		{line: "2026-01-02T03:04:05.6007008Z stdout F  two  spaces ", want: criEntry{Time: ts, Stream: "stdout", Content: []byte(" two  spaces ")}},
		{line: "", err: "no stream"},
		{line: "yesterday stdout F x", err: "timestamp"},
		{line: "2026-01-02T03:04:05Z stdin F x", err: "neither stdout nor stderr"},
		{line: "2026-01-02T03:04:05Z stdout X x", err: "neither P nor F"},
		{line: "2026-01-02T03:04:05Z stdout F", err: "no content"},
		{line: "2026-01-02T03:04:05Z stdout", err: "no tag"},
	} {
		got, err := parseCRIEntry([]byte(tc.line))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseCRIEntry(%q) = %v, want an error about %q", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseCRIEntry(%q): %v", tc.line, err)
			continue
		}
		if !got.Time.Equal(tc.want.Time) || got.Stream != tc.want.Stream || got.Partial != tc.want.Partial || !bytes.Equal(got.Content, tc.want.Content) {
			t.Errorf("parseCRIEntry(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
		if again := appendCRIEntry(nil, got); string(again) != tc.line+"\n" {
			t.Errorf("appendCRIEntry(parse(%q)) = %q", tc.line, again)
		}
	}
}

func FuzzParseCRIEntry(f *testing.F) {
	for _, s := range []string{
		"2026-01-02T03:04:05.6007008Z stdout F hello world",
		"2026-01-02T03:04:05Z stderr P ",
		"2026-01-02T03:04:05+02:00 stdout F x",
		"garbage",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseCRIEntry(line)
		if err != nil {
			return
		}
		out := appendCRIEntry(nil, e)
		e2, err := parseCRIEntry(out[:len(out)-1])
		if err != nil {
			t.Fatalf("parse(append(parse(%q))) = %v", line, err)
		}
		if !e2.Time.Equal(e.Time) || e2.Stream != e.Stream || e2.Partial != e.Partial || !bytes.Equal(e2.Content, e.Content) {
			t.Errorf("round trip of %q: %+v, then %+v", line, e, e2)
		}
	})
}

// writeLog writes output to a container log through its copier, as a
// container's stdout would.
func writeLog(t *testing.T, path string, stream string, outputs ...string) *containerLog {
	t.Helper()
	l, err := newContainerLog(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range outputs {
		l.copyStream(stream, strings.NewReader(out))
	}
	l.finish()
	return l
}

func readLog(t *testing.T, l *containerLog, o logOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := streamLog(context.Background(), &b, func() {}, l.path, l.done, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestContainerLogKeepsOutput(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3*criMaxContent+17)
	out := "first\n\n" + long + "\nlast without newline"
	l := writeLog(t, filepath.Join(t.TempDir(), "0.log"), "stdout", out)
	if got := readLog(t, l, logOptions{Tail: -1}); got != out {
		t.Errorf("log read back differs: %d bytes, want %d", len(got), len(out))
	}
	raw, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if _, err := parseCRIEntry([]byte(strings.TrimSuffix(line, "\n"))); err != nil {
			t.Errorf("log line %q: %v", line, err)
		}
	}
}

func TestStreamLogOptions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "0.log")
	old := time.Now().Add(-time.Hour)
	var b []byte
	for i, s := range []string{"one", "two", "three", "four"} {
		ts := old
		if i >= 2 {
			ts = time.Now().Add(time.Hour)
		}
		b = appendCRIEntry(b, criEntry{Time: ts, Stream: "stdout", Content: []byte(s)})
	}
	b = append(b, "not a CRI entry\n"...) // skipped
	b = appendCRIEntry(b, criEntry{Time: time.Now().Add(time.Hour), Stream: "stderr", Partial: true, Content: []byte("fi")})
	b = appendCRIEntry(b, criEntry{Time: time.Now().Add(time.Hour), Stream: "stderr", Content: []byte("ve")})
	b = append(b, "2026-01-02T03:04:05Z stdout F unfinished"...) // being written
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l := &containerLog{path: path, done: make(chan struct{})}
	close(l.done)
	for _, tc := range []struct {
		name string
		o    logOptions
		want string
	}{
		{"all", logOptions{Tail: -1}, "one\ntwo\nthree\nfour\nfive\n"},
		{"tail 2", logOptions{Tail: 2}, "five\n"},
		{"tail 3", logOptions{Tail: 3}, "five\n"}, // the malformed line counts
		{"tail 4", logOptions{Tail: 4}, "four\nfive\n"},
		{"tail 0", logOptions{Tail: 0}, ""},
		{"tail more than there is", logOptions{Tail: 100}, "one\ntwo\nthree\nfour\nfive\n"},
		{"limit", logOptions{Tail: -1, LimitBytes: 6}, "one\ntw"},
		{"since", logOptions{Tail: -1, Since: time.Now()}, "three\nfour\nfive\n"},
		{"follow a finished log", logOptions{Tail: -1, Follow: true}, "one\ntwo\nthree\nfour\nfive\n"},
	} {
		if got := readLog(t, l, tc.o); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	withTS := readLog(t, l, logOptions{Tail: 1, Timestamps: true})
	ts, text, _ := strings.Cut(withTS, " ")
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || text != "ve\n" {
		t.Errorf("timestamps: %q (%v)", withTS, err)
	}
}

func TestStreamLogFollows(t *testing.T) {
	t.Parallel()
	l, err := newContainerLog(filepath.Join(t.TempDir(), "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		l.copyStream("stdout", r)
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		l.finish()
	}()
	got := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_ = streamLog(context.Background(), &b, func() {}, l.path, l.done, logOptions{Tail: -1, Follow: true})
		got <- b.String()
	}()
	for _, s := range []string{"a\n", "b", "c\n", "d\n"} {
		if _, err := w.WriteString(s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * followPoll) // let the follower catch up in between
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "a\nbc\nd\n" {
			t.Errorf("followed %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not stop at the end of the log")
	}
}

func TestParseLogOptions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tc := range []struct {
		query string
		want  logOptions
		err   string
	}{
		{"", logOptions{Tail: -1}, ""},
		{"tailLines=5&timestamps=true&follow=1&previous=false&limitBytes=100", logOptions{Tail: 5, Timestamps: true, Follow: true, LimitBytes: 100}, ""},
		{"sinceSeconds=60", logOptions{Tail: -1, Since: now.Add(-time.Minute)}, ""},
		{"sinceTime=2026-05-06T07:00:00Z", logOptions{Tail: -1, Since: time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)}, ""},
		{"tailLines=-1", logOptions{}, "tailLines"},
		{"tailLines=x", logOptions{}, "tailLines"},
		{"limitBytes=0", logOptions{}, "limitBytes"},
		{"sinceSeconds=0", logOptions{}, "sinceSeconds"},
		{"sinceTime=yesterday", logOptions{}, "sinceTime"},
		{"sinceSeconds=5&sinceTime=2026-05-06T07:00:00Z", logOptions{}, "exclude"},
		{"follow=maybe", logOptions{}, "follow"},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseLogOptions(q, now)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseLogOptions(%q) = %v, want an error about %s", tc.query, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseLogOptions(%q): %v", tc.query, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(logOptions{})); diff != "" {
			t.Errorf("parseLogOptions(%q) (-want +got):\n%s", tc.query, diff)
		}
	}
}

func FuzzParseLogOptions(f *testing.F) {
	for _, s := range []string{"tailLines=5", "limitBytes=1&follow=true", "sinceSeconds=9999999999999", "sinceTime=2026-05-06T07:00:00Z", "timestamps=T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		o, err := parseLogOptions(q, time.Now())
		if err != nil {
			return
		}
		if o.Tail < -1 || o.LimitBytes < 0 {
			t.Errorf("parseLogOptions(%q) = %+v", query, o)
		}
	})
}

func TestTerminationMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out strings.Builder
	for i := range 100 {
		out.WriteString(strings.Repeat("z", 30) + " line " + itoa(i) + "\n")
	}
	logPath := writeLog(t, filepath.Join(dir, "0.log"), "stderr", out.String()).path
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("HEAD"+strings.Repeat("m", maxTerminationMessage)), 0o600); err != nil {
		t.Fatal(err)
	}
	fallback := corev1.TerminationMessageFallbackToLogsOnError
	if got := terminationMessage(big, corev1.TerminationMessageReadFile, 0, logPath); got != strings.Repeat("m", maxTerminationMessage) {
		t.Errorf("a long message keeps its last %d bytes; got %d bytes starting %.10q", maxTerminationMessage, len(got), got)
	}
	if got := terminationMessage(empty, fallback, 0, logPath); got != "" {
		t.Errorf("success falls back to nothing, got %q", got)
	}
	if got := terminationMessage(empty, corev1.TerminationMessageReadFile, 1, logPath); got != "" {
		t.Errorf("File policy falls back to nothing, got %q", got)
	}
	got := terminationMessage(filepath.Join(dir, "missing"), fallback, 1, logPath)
	if len(got) != maxFallbackMessageLogBytes || !strings.HasSuffix(got, " line 99\n") {
		t.Errorf("fallback to logs: %d bytes ending %q, want %d ending with the last line", len(got), got[max(0, len(got)-20):], maxFallbackMessageLogBytes)
	}
}

func TestKeyFiles(t *testing.T) {
	t.Parallel()
	data := map[string][]byte{"a": []byte("A"), "b": []byte("B")}
	files, err := keyFiles("ConfigMap", "ns/cm", data, nil, false, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].path != "a" || files[1].mode != 0o600 {
		t.Errorf("all keys: %+v", files)
	}
	files, err = keyFiles("ConfigMap", "ns/cm", data, []corev1.KeyToPath{{Key: "b", Path: "x/y/b", Mode: ptr(int32(0o755))}}, false, 0o644)
	if err != nil || len(files) != 1 || files[0].path != "x/y/b" || files[0].mode != 0o755 {
		t.Errorf("items: %+v, %v", files, err)
	}
	if _, err := keyFiles("Secret", "ns/s", data, []corev1.KeyToPath{{Key: "c", Path: "c"}}, false, 0o644); err == nil || !strings.Contains(err.Error(), `Secret ns/s has no key "c"`) {
		t.Errorf("missing key: %v", err)
	}
	if files, err := keyFiles("Secret", "ns/s", data, []corev1.KeyToPath{{Key: "c", Path: "c"}}, true, 0o644); err != nil || len(files) != 0 {
		t.Errorf("missing optional key: %+v, %v", files, err)
	}
}

func TestWriteVolume(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "vol")
	err := writeVolume(dir, []volumeFile{
		{path: "top", data: []byte("1"), mode: 0o640},
		{path: "deep/er/tool", data: []byte("#!/bin/sh\n"), mode: 0o755},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{"top": 0o640, "deep/er/tool": 0o755} {
		fi, err := os.Stat(filepath.Join(dir, path))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, %v; want mode %v", path, fi.Mode(), err, mode)
		}
	}
	for _, bad := range []string{"../escape", "/abs", "a/../../escape", ".."} {
		if err := writeVolume(dir, []volumeFile{{path: bad, mode: 0o644}}, nil); err == nil || !strings.Contains(err.Error(), "inside the volume") {
			t.Errorf("path %q: %v, want a refusal", bad, err)
		}
	}
}

func TestDownwardValues(t *testing.T) {
	t.Parallel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1", Labels: map[string]string{"b": "2", "a": "1"}, Annotations: map[string]string{"note": "x"}},
		Spec: corev1.PodSpec{NodeName: "n", ServiceAccountName: "sa", Containers: []corev1.Container{{
			Name: "c",
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
		}}},
	}
	for path, want := range map[string]string{
		"metadata.name": "p", "metadata.namespace": "ns", "metadata.uid": "u-1",
		"metadata.labels": "a=\"1\"\nb=\"2\"", "metadata.labels['b']": "2", "metadata.annotations['note']": "x",
		"spec.nodeName": "n", "spec.serviceAccountName": "sa", "status.hostIP": nodeIP, "status.podIP": podIP(pod),
	} {
		if got, err := podFieldValue(pod, path); err != nil || got != want {
			t.Errorf("fieldRef %s = %q, %v; want %q", path, got, err, want)
		}
	}
	other := pod.DeepCopy()
	other.UID = "u-2"
	if ip := net.ParseIP(podIP(pod)); ip == nil || !ip.IsLoopback() || ip.Equal(net.ParseIP(nodeIP)) || podIP(other) == podIP(pod) {
		t.Errorf("pod IPs %s (u-1), %s (u-2): want two loopback addresses of their own, not the node's", podIP(pod), podIP(other))
	}
	if _, err := podFieldValue(pod, "spec.nothing"); err == nil {
		t.Error("an unknown fieldRef resolved")
	}
	alloc := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	for _, tc := range []struct {
		ref  corev1.ResourceFieldSelector
		want string
	}{
		{corev1.ResourceFieldSelector{Resource: "limits.cpu"}, "2"},
		{corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1m")}, "1500"},
		{corev1.ResourceFieldSelector{Resource: "requests.memory", Divisor: resource.MustParse("1Mi")}, "64"},
		{corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}, "1024"}, // the node's
	} {
		if got, err := resourceFieldValue(pod, "c", &tc.ref, alloc); err != nil || got != tc.want {
			t.Errorf("resourceFieldRef %+v = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
	if _, err := resourceFieldValue(pod, "other", &corev1.ResourceFieldSelector{Resource: "limits.cpu"}, alloc); err == nil {
		t.Error("resourceFieldRef of an unknown container resolved")
	}
}

func TestShouldRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy        corev1.RestartPolicy
		init, sidecar bool
		code          int32
		want          bool
	}{
		{corev1.RestartPolicyNever, false, false, 1, false},
		{corev1.RestartPolicyNever, true, false, 1, false},
		{corev1.RestartPolicyOnFailure, false, false, 0, false},
		{corev1.RestartPolicyOnFailure, false, false, 2, true},
		{corev1.RestartPolicyAlways, false, false, 0, true},
		{corev1.RestartPolicyAlways, true, false, 0, false},
		{corev1.RestartPolicyAlways, true, false, 1, true},
		// A sidecar restarts whatever the pod's policy and its exit.
		{corev1.RestartPolicyNever, true, true, 0, true},
		{corev1.RestartPolicyNever, true, true, 1, true},
	} {
		c := &containerState{init: tc.init, sidecar: tc.sidecar}
		if got := shouldRestart(c, tc.policy, tc.code); got != tc.want {
			t.Errorf("shouldRestart(%s, init=%v, sidecar=%v, %d) = %v", tc.policy, tc.init, tc.sidecar, tc.code, got)
		}
	}
}

func TestInstallCommands(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	got, err := installCommands(bin, map[string]string{"aerie": link})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(got["aerie"])
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o555 != 0o555 {
		t.Errorf("installed command: %v, %v; want a regular file everyone can execute", fi.Mode(), err)
	}
	for _, bad := range []map[string]string{{"a/b": src}, {"x": filepath.Join(bin, "missing")}, {"dir": bin}} {
		if _, err := installCommands(t.TempDir(), bad); err == nil || !strings.Contains(err.Error(), "PodRunnerOptions.Commands") {
			t.Errorf("installCommands(%v) = %v, want an error naming the option", bad, err)
		}
	}
}

func TestVolumeCommand(t *testing.T) {
	t.Parallel()
	mounts := []mount{{Target: "/aerie/bin", Source: "/var/pods/p/volumes/aerie-bin"}, {Target: "/workspace/", Source: "/var/pods/p/ws"}}
	for path, want := range map[string]string{
		"/aerie/bin/aerie":        "/var/pods/p/volumes/aerie-bin/aerie",
		"/workspace/tools/run.sh": "/var/pods/p/ws/tools/run.sh",
		"/aerie/binary":           "/aerie/binary",
		"/aerie/bin/../../etc/sh": "/aerie/bin/../../etc/sh",
		"/usr/bin/aerie":          "/usr/bin/aerie",
	} {
		if got := volumeCommand(path, mounts); got != want {
			t.Errorf("volumeCommand(%q) = %q, want %q", path, got, want)
		}
	}
}
