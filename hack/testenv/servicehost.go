package testenv

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
)

// RealNode reports whether the end-to-end tests run their pods on a real
// node (StartNode) rather than on the local pod runner: AERIE_E2E_NODE=real.
func RealNode() bool { return os.Getenv("AERIE_E2E_NODE") == "real" }

// ServiceHost is the address the servers a test starts for its pods (the
// model server, PostgreSQL) listen on and are reached at: 127.0.0.1 for the
// local pod runner, whose pods share the host's network, and the host's
// own address on a real node, where 127.0.0.1 is each pod's own.
func ServiceHost() string {
	if !RealNode() {
		return "127.0.0.1"
	}
	serviceHostOnce.Do(func() {
		ip, err := hostIP()
		if err != nil {
			ip = "127.0.0.1"
		}
		serviceHostIP = ip
	})
	return serviceHostIP
}

var (
	serviceHostOnce sync.Once
	serviceHostIP   string
)

// listenService listens on a free port of ServiceHost.
func listenService() (net.Listener, error) {
	return net.Listen("tcp", net.JoinHostPort(ServiceHost(), "0"))
}

// NewServiceServer is httptest.NewServer listening on ServiceHost, for a
// server the test's pods call.
func NewServiceServer(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	l, err := listenService()
	if err != nil {
		panic("testenv: listen on " + ServiceHost() + ": " + err.Error())
	}
	_ = srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	return srv
}
