package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/aerie-run/aerie/runner/runconfig"
)

// BenchmarkDesiredChildren measures building an attempt's pod and runner
// ConfigMap, which every session start pays.
func BenchmarkDesiredChildren(b *testing.B) {
	cfg, s := testConfig(), fullSession()
	a := fullAttempt(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = desiredPod(cfg, s, a)
		if _, err := desiredConfigMap(s, a); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObservePod measures mapping a finished pod to its result, which
// every reconcile of a running session pays.
func BenchmarkObservePod(b *testing.B) {
	msg, err := runconfig.EncodeReport(runconfig.Report{Outcome: runconfig.OutcomeCompleted, Summary: "Fixed the tests.", Usage: runconfig.Usage{InputTokens: 1000}})
	if err != nil {
		b.Fatal(err)
	}
	pod := podWith(corev1.PodSucceeded, exited(0, string(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if r := observePod(pod, false); r.State != podFinished {
			b.Fatal(r)
		}
	}
}
