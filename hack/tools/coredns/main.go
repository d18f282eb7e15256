// CoreDNS for the test bed's real node, with only the plugins it needs: the cluster domain from
// the API server (kubernetes), no forward plugin, so nothing is ever asked of the host resolver.
// The stock main (github.com/coredns/coredns) links every plugin (cloud SDKs included).
package main

import (
	"log"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// In CoreDNS's execution order (its plugin.cfg).
var directives = []string{
	"bind", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		log.Fatal(err)
	}
	coremain.Run()
}
