package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// requests counts the API server's requests by verb and resource ("POST
// pods", "PATCH agentsessions/status"), from its apiserver_request_total
// counter. Watches are left out: they are long-running, and counted when
// they start rather than for what they carry.
type requests map[string]float64

// scrapeRequests reads the API server's request counts from its /metrics
// endpoint.
func scrapeRequests(ctx context.Context, cfg *rest.Config) (requests, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create metrics client: %w", err)
	}
	body, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get the API server's metrics: %w", err)
	}
	return parseRequests(bytes.NewReader(body))
}

// parseRequests sums apiserver_request_total of the Prometheus text
// exposition in r by verb and resource.
func parseRequests(r io.Reader) (requests, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	out := requests{}
	mf, ok := families["apiserver_request_total"]
	if !ok {
		return out, nil
	}
	for _, m := range mf.GetMetric() {
		var verb, resource, sub string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "verb":
				verb = l.GetValue()
			case "resource":
				resource = l.GetValue()
			case "subresource":
				sub = l.GetValue()
			}
		}
		if verb == "WATCH" || verb == "" || resource == "" {
			continue
		}
		if sub != "" {
			resource += "/" + sub
		}
		out[verb+" "+resource] += m.GetCounter().GetValue()
	}
	return out, nil
}

// since is the requests made between before and r.
func (r requests) since(before requests) requests {
	out := requests{}
	for k, v := range r {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// total is the number of requests.
func (r requests) total() float64 {
	var n float64
	for _, v := range r {
		n += v
	}
	return n
}

// String lists the requests, most frequent first.
func (r requests) String() string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(r[b], r[a]), strings.Compare(a, b))
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, r[k]))
	}
	return strings.Join(parts, ", ")
}
