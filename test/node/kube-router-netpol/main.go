// Command kube-router-netpol is kube-router v2.1.0's NetworkPolicy controller alone (iptables +
// ipset), for the node fixture (../README.md). It does what `kube-router --run-firewall=true
// --run-router=false --run-service-proxy=false` does (pkg/cmd/kube-router.go, kube-router v2.1.0:
// informers, cache sync, health controller, netpol.NewNetworkPolicyController, Run) without
// importing pkg/cmd, whose routing, proxy and load-balancer controllers pull in gobgp and
// aws-sdk-go: this module compiles none of them. The flags are kube-router's own
// (pkg/options.KubeRouterConfig.AddFlags); the routing and proxy ones are accepted and ignored.
// go.mod lifts the k8s.io modules to v0.36.3 (kube-router v2.1.0 asks v0.29.2) and every module it
// shares with ../kubelet to that module's version, so the Go build cache the API server and kubelet
// builds filled serves most of its packages (62 CPU-s to build instead of 202: README.md); the
// NetworkPolicy test is what shows the controller still enforces policies on these libraries.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cloudnativelabs/kube-router/v2/pkg/controllers/netpol"
	"github.com/cloudnativelabs/kube-router/v2/pkg/healthcheck"
	"github.com/cloudnativelabs/kube-router/v2/pkg/options"
	"github.com/cloudnativelabs/kube-router/v2/pkg/version"
	"github.com/spf13/pflag"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "kube-router-netpol: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	klog.InitFlags(nil)
	config := options.NewKubeRouterConfig()
	config.AddFlags(pflag.CommandLine)
	pflag.Parse()
	if err := flag.Set("logtostderr", "true"); err != nil {
		return err
	}
	if err := flag.Set("v", config.VLevel); err != nil {
		return err
	}
	if config.Version {
		version.PrintVersion(false)
		return nil
	}
	if !config.RunFirewall || config.RunRouter || config.RunServiceProxy || config.RunLoadBalancer {
		return fmt.Errorf("only the NetworkPolicy controller is built in: pass --run-firewall=true --run-router=false --run-service-proxy=false")
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (iptables, ipset)")
	}
	// Out-of-cluster only: the fixture's kube-router runs on the node, not in a pod.
	restConfig, err := clientcmd.BuildConfigFromFlags(config.Master, config.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}

	stopCh := make(chan struct{})
	var wg sync.WaitGroup
	var ipsetMutex sync.Mutex
	healthChan := make(chan *healthcheck.ControllerHeartbeat, 10)

	hc, err := healthcheck.NewHealthController(config)
	if err != nil {
		return fmt.Errorf("health controller: %w", err)
	}
	wg.Add(1)
	go hc.RunServer(stopCh, &wg)

	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	namespaces := factory.Core().V1().Namespaces().Informer()
	policies := factory.Networking().V1().NetworkPolicies().Informer()
	factory.Start(stopCh)
	synced := make(chan struct{})
	go func() { factory.WaitForCacheSync(stopCh); close(synced) }()
	select {
	case <-synced:
	case <-time.After(config.CacheSyncTimeout):
		return fmt.Errorf("informer caches not synced within %s", config.CacheSyncTimeout)
	}
	hc.SetAlive()
	wg.Add(1)
	go hc.RunCheck(healthChan, stopCh, &wg)

	iptablesHandlers, ipsetHandlers, err := netpol.NewIPTablesHandlers(config)
	if err != nil {
		return fmt.Errorf("iptables handlers: %w", err)
	}
	npc, err := netpol.NewNetworkPolicyController(client, config, pods, policies, namespaces, &ipsetMutex, iptablesHandlers, ipsetHandlers)
	if err != nil {
		return fmt.Errorf("network policy controller: %w", err)
	}
	for informer, handler := range map[cache.SharedIndexInformer]cache.ResourceEventHandler{
		pods: npc.PodEventHandler, namespaces: npc.NamespaceEventHandler, policies: npc.NetworkPolicyEventHandler,
	} {
		if _, err := informer.AddEventHandler(handler); err != nil {
			return fmt.Errorf("event handler: %w", err)
		}
	}
	wg.Add(1)
	go npc.Run(healthChan, stopCh, &wg)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
	klog.Info("stopping the NetworkPolicy controller")
	close(stopCh)
	wg.Wait()
	return nil
}
