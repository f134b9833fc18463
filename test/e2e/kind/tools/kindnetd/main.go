// A stand-in for kindnetd, the CNI daemon kind's clusters run, for the offline kind e2e's node
// image (test/e2e/kind/node-image.sh): kindnetd is no Go module the module proxy serves. It writes
// the node's CNI configuration (ptp, host-local addresses of the cluster's pod subnet, portmap)
// the way kindnetd does, then waits to be stopped. That serves a one-node cluster (the e2e's) and
// no more: no routes to other nodes, no masquerading, no network policies.
//
// A static program on a layer of its own: the image kind's DaemonSet runs holds this file and
// nothing else (no shell, no base image).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

const confDir = "/etc/cni/net.d"

func main() {
	// kind's DaemonSet sets POD_SUBNET from the cluster's podSubnet (one IPv4 range here).
	subnet := strings.TrimSpace(os.Getenv("POD_SUBNET"))
	if subnet == "" || strings.Contains(subnet, ",") {
		fmt.Fprintf(os.Stderr, "kindnetd stand-in: POD_SUBNET must be one range, got %q\n", subnet)
		os.Exit(1)
	}
	conf := fmt.Sprintf(`{ "cniVersion": "0.4.0", "name": "kindnet", "plugins": [
  { "type": "ptp", "ipMasq": false, "mtu": 1500,
    "ipam": { "type": "host-local", "dataDir": "/run/cni-ipam-state",
              "routes": [{ "dst": "0.0.0.0/0" }], "ranges": [[{ "subnet": %q }]] } },
  { "type": "portmap", "capabilities": { "portMappings": true } } ] }
`, subnet)
	// Written aside, then renamed: the runtime never reads half a file.
	tmp := filepath.Join(confDir, ".10-kindnet.conflist")
	if err := os.WriteFile(tmp, []byte(conf), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "kindnetd stand-in: %v\n", err)
		os.Exit(1)
	}
	if err := os.Rename(tmp, filepath.Join(confDir, "10-kindnet.conflist")); err != nil {
		fmt.Fprintf(os.Stderr, "kindnetd stand-in: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("kindnetd stand-in: CNI configuration for %s written\n", subnet)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
