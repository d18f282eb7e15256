// CoreDNS for the test bed's real node and the kind node image, with only the plugins their
// Corefiles name. The test bed's Corefile serves the cluster domain from the API server
// (kubernetes) and has no forward, so nothing is ever asked of the host resolver; kubeadm's
// Corefile (the kind cluster's) also names prometheus, loop, reload and forward, which must be
// linked or CoreDNS refuses to start. The stock main (github.com/coredns/coredns) links every
// plugin (cloud SDKs included).
package main

import (
	"log"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// In CoreDNS's execution order (its plugin.cfg).
var directives = []string{
	"reload", "bind", "ready", "health", "prometheus", "errors", "log", "loadbalance", "cache",
	"kubernetes", "loop", "forward",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		log.Fatal(err)
	}
	coremain.Run()
}
