package testenv

import (
	"net"
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
