// Command pause is the sandbox ("pause") image's only program: it holds a
// pod's namespaces open until it is told to stop, and reaps the zombies
// of the processes that share its PID namespace. hack/node.sh builds it
// statically and packs it into the image containerd runs for every pod.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
