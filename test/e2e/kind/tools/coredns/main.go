// CoreDNS with the plugins a kind cluster's Corefile uses, and no others, for the offline kind
// e2e's node image (test/e2e/kind/build.sh). The Corefile is kubeadm's default (kind keeps it):
// errors, health, ready, kubernetes, prometheus, forward, cache, loop, reload, loadbalance. The
// full CoreDNS links some 60 plugins (cloud DNS providers' SDKs, etcd, dnstap, QUIC, ...) whose
// cold build dominated the e2e's first run (docs/testing.md, "On kind"). This is the way CoreDNS
// documents for a chosen plugin set: a main package that imports coremain and the plugins, with
// the directives in CoreDNS's own order (core/dnsserver/zdirectives.go). A Corefile naming any
// other plugin is refused at start ("unknown directive").
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The order of core/dnsserver/zdirectives.go, kept to these plugins: every plugin sees the
// effects of those after it ("prometheus" is the metrics plugin's directive).
var directives = []string{
	"reload",
	"ready",
	"health",
	"prometheus",
	"errors",
	"loadbalance",
	"cache",
	"kubernetes",
	"loop",
	"forward",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
