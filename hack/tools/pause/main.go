// pause: the sandbox ("infra") container of the test bed's real node. It holds the pod's
// namespaces, reaps zombies and exits on SIGINT/SIGTERM, like Kubernetes' pause.c. Built static
// (CGO off) and imported into containerd as the configured sandbox_image, because no registry
// is reachable here.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (stream-autoscaler test bed)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal %v\n", s)
		os.Exit(0)
	}
}
