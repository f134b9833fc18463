// The pod sandbox's process (containerd's sandbox_image runs it): it holds the pod's namespaces
// open, reaps the zombies of a shared PID namespace and exits on SIGINT or SIGTERM. Ours, because
// the e2e cannot pull registry.k8s.io/pause and a static Go binary needs no base image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited; -1 = any child, WNOHANG = do not block.
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
