package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aerie-run/aerie/hack/testenv"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestSummarize(t *testing.T) {
	t.Parallel()
	upTo := func(n int) []time.Duration {
		var out []time.Duration
		for i := n; i >= 1; i-- { // unsorted on purpose
			out = append(out, ms(i))
		}
		return out
	}
	tests := []struct {
		name string
		lat  []time.Duration
		span time.Duration
		want summary
	}{
		{"one", []time.Duration{ms(7)}, ms(10), summary{N: 1, P50: ms(7), P99: ms(7), Max: ms(7), Span: ms(10)}},
		{"two", []time.Duration{ms(9), ms(1)}, ms(10), summary{N: 2, P50: ms(1), P99: ms(9), Max: ms(9), Span: ms(10)}},
		// Nearest rank: of 100, p50 is the 50th and p99 the 99th smallest.
		{"a hundred", upTo(100), ms(200), summary{N: 100, P50: ms(50), P99: ms(99), Max: ms(100), Span: ms(200)}},
		// Of 300, p99 is the 297th: three values may lie above it.
		{"three hundred", upTo(300), ms(300), summary{N: 300, P50: ms(150), P99: ms(297), Max: ms(300), Span: ms(300)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := summarize(tt.lat, tt.span)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(summary{})); diff != "" {
				t.Errorf("summarize (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := summarize(nil, ms(1)); err == nil {
		t.Error("summarize(nil) succeeded, want an error")
	}
}

// benchLineRE is a result line of the Go benchmark format: a name without
// spaces, an iteration count, then value-unit pairs.
var benchLineRE = regexp.MustCompile(`^Benchmark\S+\t1(\t[0-9.]+ \S+)+$`)

func TestBenchLine(t *testing.T) {
	t.Parallel()
	s := summary{N: 300, P50: ms(1500), P99: ms(2970), Max: ms(3000), Span: 4 * time.Second,
		Requests: requests{"POST pods": 300, "PUT jobs/status": 300},
		CPU:      cpuSample{"controller": 600 * time.Millisecond, "kube-apiserver": 3 * time.Second}}
	got := s.benchLine("BenchmarkCreateToPod/controller=job/client-qps=20")
	want := "BenchmarkCreateToPod/controller=job/client-qps=20\t1\t1500.0 p50-ms\t2970.0 p99-ms\t3000.0 max-ms\t75.0 pods/s\t2.00 requests/pod\t2.00 controller-cpu-ms/pod\t10.00 kube-apiserver-cpu-ms/pod"
	if got != want {
		t.Errorf("benchLine:\n got %q\nwant %q", got, want)
	}
	if !benchLineRE.MatchString(got) {
		t.Errorf("benchLine %q is not in the Go benchmark format", got)
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	runs := map[string][]summary{
		"a": {{N: 10, P50: ms(10), P99: ms(20), Max: ms(30), Span: time.Second}, {N: 10, P50: ms(30), P99: ms(40), Max: ms(50), Span: 2 * time.Second}},
		"b": {{N: 10, P50: ms(1), P99: ms(2), Max: ms(3), Span: time.Second}},
	}
	got := table([]string{"b", "a"}, runs)
	want := `| controller | run | p50 ms | p99 ms | max ms | pods/s |
| --- | --- | ---: | ---: | ---: | ---: |
| b | 1 | 1 | 2 | 3 | 10.0 |
| a | 1 | 10 | 20 | 30 | 10.0 |
| a | 2 | 30 | 40 | 50 | 5.0 |
| a | median | 20 | 30 | 40 | 7.5 |
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

const metricsSample = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 300
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="aerie.run",resource="agentsessions",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 299
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 4
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 1
# HELP apiserver_storage_objects [STABLE] Number of stored objects
# TYPE apiserver_storage_objects gauge
apiserver_storage_objects{resource="pods"} 301
`

func TestParseRequests(t *testing.T) {
	t.Parallel()
	got, err := parseRequests(strings.NewReader(metricsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := requests{"POST pods": 302, "PATCH agentsessions/status": 299}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseRequests (-want +got):\n%s", diff)
	}
	before := requests{"POST pods": 2, "PATCH agentsessions/status": 299}
	if diff := cmp.Diff(requests{"POST pods": 300}, got.since(before)); diff != "" {
		t.Errorf("since (-want +got):\n%s", diff)
	}
	if s := got.String(); s != "POST pods 302, PATCH agentsessions/status 299" {
		t.Errorf("String() = %q", s)
	}
	if _, err := parseRequests(strings.NewReader("apiserver_request_total{verb=\"GET\" 1\n")); err == nil {
		t.Error("parseRequests accepted a broken exposition")
	}
}

func FuzzParseRequests(f *testing.F) {
	f.Add(metricsSample)
	f.Add("")
	f.Add("apiserver_request_total 5\n")
	f.Add(`apiserver_request_total{verb="GET",resource="pods"} NaN` + "\n")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := parseRequests(strings.NewReader(text))
		if err != nil {
			return
		}
		for k := range r {
			if verb, _, ok := strings.Cut(k, " "); !ok || verb == "WATCH" {
				t.Errorf("key %q: want \"VERB resource\", never a watch", k)
			}
		}
		_ = r.String()
	})
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     procStat
		wantErr  bool
	}{
		{"kube-apiserver", "4242 (kube-apiserver) S 4000 4242 4000 0 -1 4194560 81092 0 0 0 1234 567 0 0 20 0 17 0 12345 2000000000 50000 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0",
			procStat{comm: "kube-apiserver", ppid: 4000, cpu: 18010 * time.Millisecond}, false},
		{"a name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 5 0 0",
			procStat{comm: "a (b) c", ppid: 1, cpu: 100 * time.Millisecond}, false},
		{"no name", "7 a R 1", procStat{}, true},
		{"too few fields", "7 (x) R 1 7 7", procStat{}, true},
		{"a bad ppid", "7 (x) R one 7 7 0 -1 0 0 0 0 0 5 5", procStat{}, true},
		{"a negative time", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 -5 5", procStat{}, true},
		{"an overflowing time", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 9223372036854775807 5", procStat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStat([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStat error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(procStat{})); diff != "" {
				t.Errorf("parseStat (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("4242 (kube-apiserver) S 4000 4242 4000 0 -1 4194560 81092 0 0 0 1234 567 0 0 20 0"))
	f.Add([]byte("7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 5 0 0"))
	f.Add([]byte("7 ()) R 1 7 7 0 -1 0 0 0 0 0 5 5"))
	f.Add([]byte(")("))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStat(b)
		if err != nil {
			return
		}
		if st.cpu < 0 {
			t.Errorf("negative CPU time %s", st.cpu)
		}
	})
}

// TestSelfStat reads this process's own stat, the file parseStat is for.
func TestSelfStat(t *testing.T) {
	t.Parallel()
	st, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != os.Getppid() {
		t.Errorf("ppid %d, want %d", st.ppid, os.Getppid())
	}
}

func TestCommands(t *testing.T) {
	t.Parallel()
	aerie := aerieController("/bin/aerie-controller", []string{"--log-level=WARN"})
	if diff := cmp.Diff([]string{"/bin/aerie-controller", "--namespace=aerie-system", "--runner-image=" + runnerImage,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--log-level=WARN"}, aerie.command("/k")); diff != "" {
		t.Errorf("aerie-controller command (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"KUBECONFIG=/k"}, aerie.env("/k")); diff != "" {
		t.Errorf("aerie-controller environment (-want +got):\n%s", diff)
	}
	kcm := "/bin/kube-controller-manager"
	base := []string{kcm, "--kubeconfig=/k", "--controllers=job-controller", "--leader-elect=false",
		"--use-service-account-credentials=false", "--secure-port=0"}
	for _, tt := range []struct {
		ctl  controller
		name string
		want []string
	}{
		{jobController(kcm, 20, 30, nil), "CreateToPod/controller=job/client-qps=20", append(base[:len(base):len(base)], "--kube-api-qps=20", "--kube-api-burst=30")},
		{jobController(kcm, -1, 0, nil), "CreateToPod/controller=job/client-qps=unlimited", append(base[:len(base):len(base)], "--kube-api-qps=-1", "--kube-api-burst=0")},
	} {
		if tt.ctl.name != tt.name {
			t.Errorf("name %q, want %q", tt.ctl.name, tt.name)
		}
		if diff := cmp.Diff(tt.want, tt.ctl.command("/k")); diff != "" {
			t.Errorf("%s command (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestMissingControllerManager checks the message a person gets without
// kube-controller-manager: it says how to build it.
func TestMissingControllerManager(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", empty)
	t.Setenv("AERIE_ENVTEST_DIR", empty)
	_, err := selectControllers(options{controllers: "job"})
	if err == nil || !strings.Contains(err.Error(), "AERIE_ENVTEST_EXTRA=kube-controller-manager hack/envtest.sh") {
		t.Errorf("selectControllers without kube-controller-manager: %v, want the command that builds it", err)
	}
	_, err = selectControllers(options{controllers: "aerie", aerieBin: filepath.Join(empty, "aerie-controller")})
	if err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("selectControllers without aerie-controller: %v, want the command that builds it", err)
	}
	_, err = selectControllers(options{controllers: "cronjob"})
	if err == nil || !strings.Contains(err.Error(), `"cronjob"`) {
		t.Errorf("selectControllers with an unknown controller: %v, want it named", err)
	}
}

func TestRecorder(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	owned := func(uid types.UID) client.Object {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{UID: uid, Controller: ptr.To(true)}}}}
	}
	r := newRecorder(2)
	r.sawObject("a", t0.Add(ms(5)))
	r.sawObject("a", t0.Add(ms(3))) // the watch saw it before the create returned
	r.sawObject("b", t0.Add(ms(4)))
	r.sawPod(owned("a"), t0.Add(ms(13)))
	r.sawPod(owned("a"), t0.Add(ms(50)))                                                                                       // a second pod: the first counts
	r.sawPod(&corev1.Pod{}, t0.Add(ms(60)))                                                                                    // no owner
	r.sawPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{UID: "b"}}}}, t0.Add(ms(60))) // owned but not controlled
	select {
	case <-r.all:
		t.Fatal("all pods seen after one")
	default:
	}
	r.sawPod(owned("b"), t0.Add(ms(24)))
	<-r.all
	lat, last, err := r.latencies()
	if err != nil {
		t.Fatal(err)
	}
	got := map[time.Duration]bool{}
	for _, l := range lat {
		got[l] = true
	}
	if diff := cmp.Diff(map[time.Duration]bool{ms(10): true, ms(20): true}, got); diff != "" {
		t.Errorf("latencies (-want +got):\n%s", diff)
	}
	if !last.Equal(t0.Add(ms(24))) {
		t.Errorf("last pod at t0%+v, want t0+24ms", last.Sub(t0))
	}

	r = newRecorder(1)
	r.sawObject("a", t0)
	r.sawObject("b", t0)
	r.sawPod(owned("a"), t0)
	if _, _, err := r.latencies(); err == nil {
		t.Error("latencies with an object without a pod succeeded")
	}
}

// TestMeasure runs measure against a real API server, with a stand-in
// for the Job controller that makes one pod per Job: every Job is paired
// with its pod.
func TestMeasure(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the envtest binaries")
	}
	cp := testenv.StartControlPlane(t)
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS = -1
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := cp.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	w, err := c.Watch(ctx, &batchv1.JobList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	made := make(chan error, 1)
	go func() {
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || ev.Type != watch.Added {
				continue
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: j.Name, Namespace: ns,
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: runnerImage}}},
			}
			if err := c.Create(ctx, pod); err != nil {
				made <- fmt.Errorf("create pod for %s: %w", j.Name, err)
				return
			}
		}
	}()

	k := jobController("kube-controller-manager", -1, 0, nil).kind
	s, err := measure(ctx, c, k, ns, load{objects: 20, clients: 4, timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-made:
		t.Fatal(err)
	default:
	}
	if s.N != 20 || s.P50 <= 0 || s.P50 > s.P99 || s.P99 > s.Max || s.Max > s.Span || s.Creating > s.Span {
		t.Errorf("summary %+v: want 20 ordered latencies within the span", s)
	}
}

func TestParseHWM(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status string
		want   int64
	}{
		{"Name:\taerie-controller\nVmPeak:\t  900 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 40000 kB\n", 50 << 20},
		{"Name:\tx\n", 0},
		{"VmHWM:\t 12 MB\n", 0},
		{"VmHWM:\t twelve kB\n", 0},
	}
	for _, tt := range tests {
		if got := parseHWM(tt.status); got != tt.want {
			t.Errorf("parseHWM(%q) = %d, want %d", tt.status, got, tt.want)
		}
	}
}
