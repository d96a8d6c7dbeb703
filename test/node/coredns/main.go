// Command coredns is CoreDNS v1.14.1 with only the plugins a cluster's DNS needs (the Corefile in
// test/node/cluster-dns.yaml, which up.sh applies): the cloud backends (route53, azure, clouddns) and their SDKs are never
// compiled. CoreDNS's own main (coredns.go) imports core/plugin, which registers every plugin, and
// core/dnsserver/zdirectives.go lists them all; here only the list below is registered, in the
// order plugin.cfg gives them (CoreDNS v1.14.1), which is the order a request passes them.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives: the plugins above, in plugin.cfg's order (CoreDNS v1.14.1).
var directives = []string{"reload", "ready", "health", "errors", "log", "cache", "kubernetes", "loop", "forward"}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
